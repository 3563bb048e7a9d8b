use super::*;

fn head(
    status: &str,
    headers: &[(&str, &str)],
    http11: bool,
    keep_alive: bool,
    is_head: bool,
) -> ResponseHead {
    let mut b = ResponseHeadBuilder::new(status.as_bytes(), http11, keep_alive, is_head).unwrap();
    for (n, v) in headers {
        b.header(n.as_bytes(), v.as_bytes()).unwrap();
    }
    b.finish()
}

fn text(h: &ResponseHead) -> String {
    String::from_utf8(h.bytes.clone()).unwrap()
}

#[test]
fn content_length_response() {
    let h = head(
        "200 OK",
        &[("Content-Type", "text/plain"), ("Content-Length", "5")],
        true,
        true,
        false,
    );
    let t = text(&h);
    assert!(t.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"));
    assert!(t.contains("\r\nDate: ") && t.ends_with("\r\n\r\n"));
    assert_eq!((h.framing, h.keep_alive), (BodyFraming::Length(5), true));
    assert!(!t.contains("Connection"));
}

#[test]
fn chunked_when_no_length_on_11() {
    let h = head("200 OK", &[], true, true, false);
    assert!(text(&h).contains("Transfer-Encoding: chunked\r\n"));
    assert_eq!((h.framing, h.keep_alive), (BodyFraming::Chunked, true));
}

#[test]
fn close_when_no_length_on_10() {
    let h = head("200 OK", &[], false, true, false);
    assert!(text(&h).contains("Connection: close\r\n"));
    assert!(!text(&h).contains("Transfer-Encoding"));
    assert_eq!((h.framing, h.keep_alive), (BodyFraming::UntilClose, false));
    let h = head("200 OK", &[("Content-Length", "0")], false, true, false);
    assert!(text(&h).contains("Connection: keep-alive\r\n"));
    assert!(h.keep_alive);
}

#[test]
fn no_body_statuses() {
    for (status, is_head) in [
        ("204 No Content", false),
        ("304 Not Modified", false),
        ("200 OK", true),
        ("101 Switching Protocols", false),
    ] {
        let h = head(status, &[], true, true, is_head);
        assert_eq!(h.framing, BodyFraming::NoBody, "{status}");
        assert!(!text(&h).contains("Transfer-Encoding"));
    }
    let h = head("200 OK", &[("Content-Length", "42")], true, true, true);
    assert!(text(&h).contains("Content-Length: 42\r\n"));
    assert_eq!(h.framing, BodyFraming::NoBody);
    let h = head(
        "204 No Content",
        &[("Content-Length", "0")],
        true,
        true,
        false,
    );
    assert!(!text(&h).contains("Content-Length"));
}

#[test]
fn hop_by_hop_dropped() {
    let h = head(
        "200 OK",
        &[
            ("Transfer-Encoding", "chunked"),
            ("Keep-Alive", "timeout=5"),
            ("Connection", "close"),
            ("Content-Length", "3"),
        ],
        true,
        true,
        false,
    );
    let t = text(&h);
    assert!(!t.contains("Transfer-Encoding") && !t.contains("Keep-Alive"));
    assert_eq!(t.matches("Connection: close").count(), 1);
    assert!(!h.keep_alive);
}

#[test]
fn app_date_and_server_win() {
    let h = head(
        "200 OK",
        &[("Date", "yesterday"), ("Server", "mine")],
        true,
        true,
        false,
    );
    let t = text(&h);
    assert_eq!(t.matches("Date:").count(), 1);
    assert_eq!(t.matches("Server:").count(), 1);
    assert!(t.contains("Server: mine\r\n"));
}

#[test]
fn validation() {
    for status in [
        "", "20 OK", "2000 OK", "abc OK", "200OK", "200 O\rK", "200 \nX", "099 Low",
    ] {
        assert!(
            ResponseHeadBuilder::new(status.as_bytes(), true, true, false).is_err(),
            "{status:?}"
        );
    }
    assert!(ResponseHeadBuilder::new(b"200", true, true, false).is_ok());
    let mut b = ResponseHeadBuilder::new(b"200 OK", true, true, false).unwrap();
    assert!(b.header(b"X Bad", b"v").is_err());
    assert!(b.header(b"", b"v").is_err());
    assert!(b.header(b"X", b"a\r\nInjected: 1").is_err());
    assert!(b.header(b"X", b"a\nb").is_err());
    assert!(b.header(b"X", b"a\x00b").is_err());
    assert!(b.header(b"Content-Length", b"-1").is_err());
    assert!(b.header(b"Content-Length", b"5").is_ok());
    assert!(b.header(b"Content-Length", b"5").is_ok());
    assert!(b.header(b"Content-Length", b"6").is_err());
}

#[test]
fn known_body_length_becomes_content_length() {
    let b = ResponseHeadBuilder::new(b"200 OK", true, true, false).unwrap();
    let h = b.finish_with_length(Some(5));
    assert_eq!(h.framing, BodyFraming::Length(5));
    assert!(text(&h).contains("Content-Length: 5\r\n"));
    // The app's own length wins; a status without a body (204) gets none.
    let mut b = ResponseHeadBuilder::new(b"200 OK", true, true, false).unwrap();
    b.header(b"Content-Length", b"7").unwrap();
    let h = b.finish_with_length(Some(5));
    assert_eq!(h.framing, BodyFraming::Length(7));
    assert_eq!(text(&h).matches("Content-Length").count(), 1);
    let h = ResponseHeadBuilder::new(b"204 No Content", true, true, false)
        .unwrap()
        .finish_with_length(Some(5));
    assert_eq!(h.framing, BodyFraming::NoBody);
    assert!(!text(&h).contains("Content-Length"));
    // HEAD: the GET's length, and no body.
    let h = ResponseHeadBuilder::new(b"200 OK", true, true, true)
        .unwrap()
        .finish_with_length(Some(5));
    assert_eq!(h.framing, BodyFraming::NoBody);
    assert!(text(&h).contains("Content-Length: 5\r\n"));
    // A HEAD answered 304 says nothing of a length.
    let h = ResponseHeadBuilder::new(b"304 Not Modified", true, true, true)
        .unwrap()
        .finish_with_length(Some(5));
    assert!(!text(&h).contains("Content-Length"));
}

#[test]
fn chunk_size_lines_are_lowercase_hex() {
    for (n, line) in [
        (0usize, &b"0\r\n"[..]),
        (9, b"9\r\n"),
        (10, b"a\r\n"),
        (500, b"1f4\r\n"),
        (65536, b"10000\r\n"),
        (usize::MAX, b"ffffffffffffffff\r\n"),
    ] {
        assert_eq!(ChunkSize::new(n).as_bytes(), line, "{n}");
    }
}

#[test]
fn body_bytes_and_completeness_follow_the_announced_length() {
    let head = |framing| ResponseHead {
        bytes: Vec::new(),
        framing,
        keep_alive: true,
    };
    use BodyFraming::*;
    assert_eq!(head(Length(4)).body_bytes(10), 4);
    assert_eq!(head(NoBody).body_bytes(10), 0);
    assert_eq!(head(Chunked).body_bytes(10), 10);
    assert_eq!(head(UntilClose).body_bytes(10), 10);
    assert!(head(Length(4)).complete(4) && !head(Length(4)).complete(3));
    assert!(head(Chunked).complete(0) && head(UntilClose).complete(7));
    assert_eq!(Length(3).as_python(), (3, false));
    assert_eq!(NoBody.as_python(), (0, false));
    assert_eq!(Chunked.as_python(), (-1, true));
    assert_eq!(UntilClose.as_python(), (-1, false));
}

#[test]
fn visible_field_check_gives_the_two_checks_errors_in_their_order() {
    let both = |name: &[u8], value: &[u8]| {
        check_field(name, value).and_then(|kind| {
            let visible = value
                .iter()
                .all(|&b| (b >= 0x20 && b != 0x7f) || b == b'\t');
            if visible {
                Ok(kind)
            } else {
                Err(INVISIBLE_VALUE)
            }
        })
    };
    let cases: [(&[u8], &[u8]); 8] = [
        (b"content-length", b"4"),
        (b"x-tab", b"a\tb"),
        (b"x-utf8", "caf\u{e9}".as_bytes()),
        (b"bad name", b"a\x7f"),
        (b"x-split", b"a\r\nb"),
        (b"x-del", b"a\x7fb"),
        (b"x-nul", b"\x01\x00"),
        (b"content-length", b"four"),
    ];
    for (name, value) in cases {
        assert_eq!(check_visible_field(name, value), both(name, value));
    }
    // Bytes above 0x7f are hyper's `obs-text`: taken, as a tab is.
    assert!(check_visible_field(b"x-utf8", "caf\u{e9} \t~".as_bytes()).is_ok());
}
