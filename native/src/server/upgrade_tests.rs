//! Whole connections (hyper, precheck_io, the service) around requests that
//! ask to upgrade: what follows one that was not upgraded is checked like any
//! request; what follows one that was goes unchecked to the new protocol.

use crate::server::fuzzing::serve_bytes;
use crate::server::HttpMode;

fn answers(input: &[u8]) -> String {
    String::from_utf8_lossy(&serve_bytes(input, 4096, HttpMode::H1)).into_owned()
}

fn statuses(answer: &str) -> Vec<&str> {
    answer.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect()
}

const DECLINED: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n";

#[test]
fn a_request_after_a_declined_upgrade_is_refused_when_h1_refuses_it() {
    let mut input = DECLINED.to_vec();
    input.extend_from_slice(b"GET /next HTTP/1.1\nHost: a\n\n");
    let answer = answers(&input);
    assert_eq!(statuses(&answer), ["200", "400"], "{answer}");
    assert!(answer.contains("Connection: close"), "{answer}");
}

#[test]
fn a_smuggling_request_after_a_declined_upgrade_is_refused() {
    let mut input = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: foo\r\n\r\n".to_vec();
    input.extend_from_slice(
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    let answer = answers(&input);
    assert_eq!(statuses(&answer), ["200", "400"], "{answer}");
}

#[test]
fn keep_alive_goes_on_after_a_declined_upgrade() {
    let mut input = DECLINED.to_vec();
    input.extend_from_slice(b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi");
    input.extend_from_slice(b"GET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let answer = answers(&input);
    assert_eq!(statuses(&answer), ["200", "200", "200"], "{answer}");
    assert!(answer.contains("\r\n\r\nhi"), "{answer}");
}

#[test]
fn an_upgrade_request_with_a_body_is_followed_through_its_body() {
    let mut input =
        b"POST / HTTP/1.1\r\nHost: a\r\nUpgrade: foo\r\nContent-Length: 5\r\n\r\nhello".to_vec();
    input.extend_from_slice(b"GET /c HTTP/1.1\r\nHost: a\r\n\r\n");
    let answer = answers(&input);
    assert_eq!(statuses(&answer), ["200", "200"], "{answer}");
}

#[test]
fn bytes_after_an_accepted_connect_are_not_http() {
    // The echo app answers 200: hyper hands the connection over (a tunnel),
    // so what follows is not read as a request and draws no 400.
    let input =
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03\x01 not http\n";
    let answer = answers(input);
    assert_eq!(statuses(&answer), ["200"], "{answer}");
}
