use super::*;

/// Feeds `raw` in pieces of `step` bytes; returns (payload, decoder).
fn decode_in_steps(raw: &[u8], step: usize, limit: u64) -> (Result<Vec<u8>>, ChunkedDecoder) {
    let mut d = ChunkedDecoder::new(limit);
    let mut out = Vec::new();
    for piece in raw.chunks(step) {
        if let Err(e) = d.feed(piece, &mut out) {
            return (Err(e), d);
        }
    }
    (Ok(out), d)
}

fn decode(raw: &[u8]) -> Result<Vec<u8>> {
    decode_in_steps(raw, raw.len().max(1), 0).0
}

const VALID: &[(&[u8], &[u8])] = &[
    (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
    (
        b"1e\r\nall your base are belong to us\r\n0\r\n\r\n",
        b"all your base are belong to us",
    ),
    (b"A\r\n0123456789\r\n000\r\n\r\n", b"0123456789"),
    (b"0005\r\nhello\r\n0\r\n\r\n", b"hello"),
    (b"5; some; parameters=stuff\r\nhello\r\n0\r\n\r\n", b"hello"),
    (b"5;foo=\"bar baz\"\r\nhello\r\n0\r\n\r\n", b"hello"),
    (b"5;a=\"q\\\"x\\\\\"\r\nhello\r\n0\r\n\r\n", b"hello"),
    (b"5 ;a = b\r\nhello\r\n0\r\n\r\n", b"hello"),
    (
        b"5\r\nhello\r\n0\r\nVary: *\r\nX-Sum:\t abc \r\n\r\n",
        b"hello",
    ),
    (b"0\r\n\r\n", b""),
];

#[test]
fn valid_bodies_in_every_split() {
    for (raw, want) in VALID {
        for step in [1, 2, 3, 7, raw.len()] {
            let (got, d) = decode_in_steps(raw, step, 0);
            assert_eq!(
                got.as_deref(),
                Ok(*want),
                "{:?} step {step}",
                String::from_utf8_lossy(raw)
            );
            assert!(d.done());
            assert!(d.leftover().is_empty());
        }
    }
}

#[test]
fn trailers_and_leftover() {
    let raw = b"3\r\nabc\r\n0\r\nX-Check: 1\r\nVary: *\r\n\r\nGET / HTTP/1.1\r\n";
    for step in [1, 4, raw.len()] {
        let (got, d) = decode_in_steps(raw, step, 0);
        assert_eq!(got.unwrap(), b"abc");
        assert_eq!(d.leftover(), b"GET / HTTP/1.1\r\n");
        assert_eq!(
            d.trailers(),
            &[
                (b"x-check".to_vec(), b"1".to_vec()),
                (b"vary".to_vec(), b"*".to_vec())
            ]
        );
    }
}

#[test]
fn incomplete_is_not_done() {
    for raw in [
        &b"5\r\nhel"[..],
        b"5\r\nhello\r\n",
        b"0\r\n",
        b"0\r\nX: y\r\n",
        b"0\r\n\r",
    ] {
        let (got, d) = decode_in_steps(raw, 1, 0);
        assert!(got.is_ok());
        assert!(!d.done());
    }
}

#[test]
fn refused() {
    let cases: &[&[u8]] = &[
        b"6_0\r\n world\r\n0\r\n\r\n",
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b"-5\r\nhello\r\n0\r\n\r\n",
        b"+5\r\nhello\r\n0\r\n\r\n",
        b" 5\r\nhello\r\n0\r\n\r\n",
        b"5 \r\nhello\r\n0\r\n\r\n",
        b"\r\nhello\r\n0\r\n\r\n",
        b";a=b\r\nhello\r\n0\r\n\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\r\nhello\r\n0\r\n\r\n",
        b"5;\r\nhello\r\n0\r\n\r\n",
        b"5;a=\r\nhello\r\n0\r\n\r\n",
        b"5;a=\"x\r\nhello\r\n0\r\n\r\n",
        b"5;ext=val\rue\r\nhello\r\n0\r\n\r\n",
        b"5;a b\r\nhello\r\n0\r\n\r\n",
        b"5\r\nhelloXY0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"5\r\nhello\r0\r\n\r\n",
        b"3\r\nfoo\r\n\r\n",
        b"10000000000000000\r\n",
        b"0\r\nContent-Length: 5\r\n\r\n",
        b"0\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"0\r\nHost: evil\r\n\r\n",
        b"0\r\n X: folded\r\n\r\n",
        b"0\r\nX : y\r\n\r\n",
        b"0\r\nX: a\x00b\r\n\r\n",
        b"0\r\nX: a\rb\r\n\r\n",
        b"0\r\nX: y\n\r\n",
        b"0\r\nnocolon\r\n\r\n",
        b"0\r\n\n",
        b"0\r\n\r\r\n",
    ];
    for raw in cases {
        for step in [1, raw.len()] {
            let (got, _) = decode_in_steps(raw, step, 0);
            let err = got.expect_err(&format!("{:?} step {step}", String::from_utf8_lossy(raw)));
            assert_eq!(err.status, 400, "{:?}", String::from_utf8_lossy(raw));
        }
    }
}

#[test]
fn error_is_sticky() {
    let mut d = ChunkedDecoder::new(0);
    let mut out = Vec::new();
    assert!(d.feed(b"z\r\n", &mut out).is_err());
    assert!(d.feed(b"0\r\n\r\n", &mut out).is_err());
}

#[test]
fn body_limit() {
    let raw = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    assert_eq!(decode_in_steps(raw, 1, 11).0.unwrap(), b"hello world");
    assert_eq!(decode_in_steps(raw, 1, 10).0.unwrap_err().status, 413);
    // Refused from the size line alone, before any of the data arrives.
    assert_eq!(
        decode_in_steps(b"ffffffff\r\n", 1, 1000)
            .0
            .unwrap_err()
            .status,
        413
    );
}

#[test]
fn size_line_and_trailer_bounds() {
    let mut long_ext = b"1;a=".to_vec();
    long_ext.extend(std::iter::repeat_n(b'x', 5000));
    assert_eq!(decode(&long_ext).unwrap_err().status, 400);
    let mut big_trailer = b"0\r\n".to_vec();
    for i in 0..2000 {
        big_trailer.extend(format!("X-{i}: vvvvvvvvvv\r\n").as_bytes());
    }
    assert_eq!(decode(&big_trailer).unwrap_err().status, 431);
}
