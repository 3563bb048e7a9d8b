//! A whole HTTP/2 connection (hyper's h2 with the worker's settings and its
//! rapid-reset and CONTINUATION bounds, the service) fed the client preface
//! and then arbitrary frames: no panic, no hang.
#![no_main]

use _native::server::fuzzing::serve_bytes;
use _native::server::HttpMode;
use libfuzzer_sys::fuzz_target;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: what every client sends next.
const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

fuzz_target!(|data: &[u8]| {
    let Some((&piece, frames)) = data.split_first() else {
        return;
    };
    let mut input = Vec::with_capacity(PREFACE.len() + SETTINGS.len() + frames.len());
    input.extend_from_slice(PREFACE);
    input.extend_from_slice(SETTINGS);
    input.extend_from_slice(frames);
    let answer = serve_bytes(&input, piece as usize * 8, HttpMode::H2);
    // The server's own SETTINGS frame comes first.
    assert!(answer.len() >= 9 && answer[3] == 4, "{answer:?}");
});
