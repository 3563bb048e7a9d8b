//! A whole HTTP/1.1 connection (precheck_io, hyper, the service) fed arbitrary
//! client bytes in arbitrary pieces: no panic, no hang, and whatever the
//! server writes is HTTP/1.x responses (hyper answers an HTTP/1.0
//! request in kind).
#![no_main]

use _native::server::fuzzing::serve_bytes;
use _native::server::HttpMode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, input)) = data.split_first() else {
        return;
    };
    let answer = serve_bytes(input, piece as usize, HttpMode::Auto);
    if !answer.is_empty() && !input.starts_with(b"PRI * HTTP/2.0") {
        assert!(answer.starts_with(b"HTTP/1."), "{answer:?}");
    }
});
