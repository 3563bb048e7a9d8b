//! The PROXY protocol parser: no panic, a header never looks at the bytes
//! after it (what follows belongs to TLS or HTTP), every prefix of a header
//! is "incomplete" (a proxy may split it anywhere), and "incomplete" never
//! lasts past the longest header the specification allows.
#![no_main]

use _native::proxy::{parse, Outcome, V1_MAX, V2_MAX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Outcome::Parsed(header) => {
            let n = header.consumed;
            assert!(n <= data.len() && n <= V2_MAX);
            if header.version == 1 {
                assert!(n <= V1_MAX);
            }
            assert_eq!(parse(&data[..n]), Outcome::Parsed(header.clone()));
            let step = (n / 64).max(1);
            for cut in (0..n).step_by(step) {
                assert_eq!(parse(&data[..cut]), Outcome::Incomplete, "cut at {cut}");
            }
        }
        Outcome::Incomplete => assert!(data.len() < V2_MAX),
        Outcome::Invalid(_) => {}
    }
});
