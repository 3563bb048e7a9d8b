use super::*;

fn parse(raw: &[u8]) -> Result<Option<(RequestHead, usize)>> {
    parse_request(raw, &Limits::default())
}

fn ok(raw: &[u8]) -> RequestHead {
    let (head, n) = parse(raw).expect("valid").expect("complete");
    assert_eq!(n, raw.len(), "head length");
    head
}

fn status(raw: &[u8]) -> u16 {
    match parse(raw) {
        Err(e) => e.status,
        Ok(r) => panic!(
            "accepted {:?}: {}",
            String::from_utf8_lossy(raw),
            r.is_some()
        ),
    }
}

#[test]
fn simple_get() {
    let h = ok(b"GET /a%20b/c?x=1&y=%20 HTTP/1.1\r\nHost: example.com\r\nX-Thing: v\r\n\r\n");
    assert_eq!(h.method(), b"GET");
    assert_eq!(h.target(), b"/a%20b/c?x=1&y=%20");
    assert_eq!(h.raw_path(), b"/a%20b/c");
    assert_eq!(h.path(), b"/a b/c");
    assert_eq!(h.query(), b"x=1&y=%20");
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.host(), Some(&b"example.com"[..]));
    assert!(h.keep_alive && !h.chunked && h.content_length.is_none());
    let fields: Vec<_> = h.fields().collect();
    assert_eq!(
        fields,
        vec![(&b"host"[..], &b"example.com"[..]), (b"x-thing", b"v")]
    );
    assert_eq!(h.header(b"X-THING"), Some(&b"v"[..]));
}

#[test]
fn body_framing() {
    let h = ok(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0012\r\n\r\n");
    assert_eq!(h.content_length, Some(12));
    let h = ok(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n");
    assert!(h.chunked);
    let h = ok(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(h.chunked);
}

#[test]
fn connection_semantics() {
    assert!(!ok(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
    assert!(ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    assert!(!ok(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
    let h = ok(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nExpect: 100-Continue\r\n\r\n");
    assert_eq!(h.upgrade(), Some(&b"websocket"[..]));
    assert!(h.expect_continue);
    assert_eq!(
        ok(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n").upgrade(),
        None
    );
    assert!(!ok(b"GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue);
}

#[test]
fn target_forms() {
    let h = ok(b"GET http://user@example.org:8080?q=1 HTTP/1.1\r\nHost: other\r\n\r\n");
    assert_eq!(h.raw_path(), b"/");
    assert_eq!(h.query(), b"q=1");
    assert_eq!(h.host(), Some(&b"example.org:8080"[..]));
    assert!(h.host_from_target());
    let h = ok(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(h.raw_path(), b"*");
    let h = ok(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert_eq!(h.raw_path(), b"");
    assert_eq!(
        ok(b"GET / HTTP/1.1\r\nHost: h:\r\n\r\n").host(),
        Some(&b"h:"[..])
    );
    let h = ok(b"GET /p#frag HTTP/1.0\r\n\r\n");
    assert_eq!((h.raw_path(), h.query()), (&b"/p"[..], &b""[..]));
}

#[test]
fn leading_crlf_and_values() {
    let h =
        ok(b"\r\n\r\nGET / HTTP/1.0\r\nName: \t value \t \r\nEmpty:\r\nObs: caf\xc3\xa9\r\n\r\n");
    assert_eq!(h.header(b"name"), Some(&b"value"[..]));
    assert_eq!(h.header(b"empty"), Some(&b""[..]));
    assert_eq!(h.header(b"obs"), Some(&b"caf\xc3\xa9"[..]));
}

#[test]
fn incomplete() {
    assert!(parse(b"").unwrap().is_none());
    assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
    assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r").unwrap().is_none());
    // The head ends at the blank line; what follows is body.
    let (_, n) = parse(b"GET / HTTP/1.0\r\n\r\nbody").unwrap().unwrap();
    assert_eq!(n, 18);
}

#[test]
fn refused() {
    let cases: &[(&[u8], u16)] = &[
        // framing
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1 0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunkedchunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: , chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo, chunked\r\n\r\n", 501),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        // line structure
        (b"GET / HTTP/1.1\r\nHost: x\r\nLong: a\r\n b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400),
        // Host: one colon, and no pct-encoding (as the `http` crate's authority)
        (b"GET / HTTP/1.1\r\nHost: a:b:1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a%41\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: [::1::2]\r\n\r\n", 400),
        // targets with bytes RFC 3986 never allows raw
        (b"GET /a<b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /?q=\"x\" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400),
        (b"GET / HTTP/1.1\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\n", 400),
        (b"\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\rX: y\r\n\r\n", 400),
        (b"GET / HTTP/1.1\rHost: x\r\n\r\n", 400),
        (b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400),
        // tokens and values
        (b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"get / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET: / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nBa\x00d: v\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX(y): v\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x07b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x7fb\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: 0123456789012345678901234567890123456789\x7f\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Type: a\r\nContent-Type: b\r\n\r\n", 400),
        // target
        (b"GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /a\x7fb HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET foo/bar HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        // version
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/0.9\r\n\r\n", 505),
        (b"GET / HTTP/1.11\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/111\r\nHost: x\r\n\r\n", 400),
        (b"GET / FTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / http/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),
        // Host
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ];
    for (raw, want) in cases {
        assert_eq!(status(raw), *want, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn limits_on_complete_heads() {
    let lim = Limits {
        request_line: 20,
        fields: 2,
        field_size: 10,
    };
    let st = |raw: &[u8]| parse_request(raw, &lim).err().map(|e| e.status);
    assert_eq!(st(b"GET /0123456789 HTTP/1.0\r\n\r\n"), Some(414));
    assert_eq!(st(b"GET /012345 HTTP/1.0\r\n\r\n"), None); // exactly 20
    assert_eq!(
        st(b"GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
        Some(431)
    );
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\n\r\n"), None);
    // The field limit counts the CRLF, as Gunicorn does.
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 123456\r\n\r\n"), Some(431));
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 12345\r\n\r\n"), None); // exactly 10
}

#[test]
fn limits_while_incomplete() {
    let lim = Limits {
        request_line: 20,
        fields: 2,
        field_size: 10,
    };
    let st = |raw: &[u8]| {
        parse_request(raw, &lim)
            .map(|r| r.is_none())
            .map_err(|e| e.status)
    };
    assert_eq!(st(b"GET /0123456789012345"), Err(414));
    assert_eq!(st(b"GET /0123456"), Ok(true));
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 1234567890123"), Err(431));
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 12345"), Ok(true));
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 12345\r"), Ok(true));
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 123456"), Err(431));
    assert_eq!(st(b"GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\nC"), Err(431));
    // An endless header is stopped once it passes the default limit.
    let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\nX: ".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 9000));
    assert_eq!(parse(&raw).err().map(|e| e.status), Some(431));
    // Endless fields: more than 100.
    let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..150 {
        raw.extend(format!("X-{i}: v\r\n").as_bytes());
    }
    assert_eq!(parse(&raw).err().map(|e| e.status), Some(431));
}

#[test]
fn unlimited() {
    let lim = Limits {
        request_line: 0,
        fields: 0,
        field_size: 0,
    };
    let mut raw = format!("GET /{} HTTP/1.1\r\nHost: x\r\n", "a".repeat(20000)).into_bytes();
    for i in 0..500 {
        raw.extend(format!("X-{i}: {}\r\n", "v".repeat(10000)).as_bytes());
    }
    raw.extend(b"\r\n");
    let (h, n) = parse_request(&raw, &lim).unwrap().unwrap();
    assert_eq!(n, raw.len());
    assert_eq!(h.field_count(), 501);
}

#[test]
fn many_fields_within_limit() {
    let lim = Limits {
        fields: 200,
        ..Limits::default()
    };
    let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..199 {
        raw.extend(format!("X-{i}: v\r\n").as_bytes());
    }
    raw.extend(b"\r\n");
    assert_eq!(
        parse_request(&raw, &lim).unwrap().unwrap().0.field_count(),
        200
    );
    raw.truncate(raw.len() - 2);
    raw.extend(b"Y: 1\r\n\r\n");
    assert_eq!(parse_request(&raw, &lim).err().map(|e| e.status), Some(431));
}

#[test]
fn byte_by_byte_feed_never_errs_early() {
    let raw = b"POST /x?y HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
    for i in 0..raw.len() {
        assert!(parse(&raw[..i]).unwrap().is_none(), "prefix {i}");
    }
    assert!(parse(raw).unwrap().is_some());
}
