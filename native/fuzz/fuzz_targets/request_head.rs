//! The request-head parser: no panic on any input, a prefix of an accepted
//! head is never refused (a client may split its head anywhere), and an
//! accepted head round-trips: its fields written out again parse to the
//! same fields.
#![no_main]

use _native::http1_codec::{parse_request, Limits, RequestHead};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(Some((head, n))) = parse_request(data, &limits) else {
        return;
    };
    assert!(n <= data.len());
    for cut in cuts(n) {
        match parse_request(&data[..cut], &limits) {
            Ok(None) => {}
            other => panic!("prefix of {cut} bytes of an accepted head: {other:?}"),
        }
    }
    let again = serialise(&head);
    match parse_request(&again, &limits) {
        Ok(Some((second, m))) => {
            assert_eq!(m, again.len());
            assert_same(&head, &second);
        }
        other => panic!("re-serialised head {again:?} not accepted: {other:?}"),
    }
});

/// Every cut of a short head; a spread of cuts of a long one.
fn cuts(n: usize) -> Vec<usize> {
    if n <= 256 {
        (0..n).collect()
    } else {
        (0..n).step_by(n / 64).chain(n - 4..n).collect()
    }
}

fn serialise(head: &RequestHead) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(head.method());
    out.push(b' ');
    out.extend_from_slice(head.target());
    out.extend_from_slice(b" HTTP/");
    out.extend_from_slice(head.version.as_str().as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in head.fields() {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn assert_same(a: &RequestHead, b: &RequestHead) {
    assert_eq!(a.method(), b.method());
    assert_eq!(a.target(), b.target());
    assert_eq!(a.path(), b.path());
    assert_eq!(a.query(), b.query());
    assert_eq!(a.version, b.version);
    assert!(a.fields().eq(b.fields()), "fields differ");
    assert_eq!(a.content_length, b.content_length);
    assert_eq!(a.chunked, b.chunked);
    assert_eq!(a.keep_alive, b.keep_alive);
    assert_eq!(a.expect_continue, b.expect_continue);
    assert_eq!(a.upgrade(), b.upgrade());
    assert_eq!(a.host(), b.host());
}
