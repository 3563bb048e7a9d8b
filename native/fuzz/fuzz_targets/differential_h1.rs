//! Differential: a head that the strict parser (`h1::parse_request`, the
//! check precheck_io.rs applies before hyper reads a byte) accepts must be
//! read the same way by hyper's own HTTP/1.1 server parser, which is what
//! the service then sees: the same method, target, version, fields (per
//! name, the values in order) and body framing. hyper refusing such a head,
//! or reading it differently, is a finding. The comparison, and the
//! differences hyper normalises harmlessly and that are let pass, are in
//! `server::fuzzing::differential_h1`.
#![no_main]

use _native::server::fuzzing::differential_h1;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = differential_h1(data) {
        panic!("{finding}");
    }
});
