use std::time::Duration;

use hyper::{Request, StatusCode};

use super::check;
use crate::server::{HttpMode, ServerConfig};

fn cfg() -> ServerConfig {
    ServerConfig {
        keepalive: Some(Duration::from_secs(2)),
        limit_request_body: 0,
        date_header: true,
        ws: None,
        ..crate::server::fuzzing::config(HttpMode::Auto)
    }
}

fn status(req: hyper::http::request::Builder, cfg: &ServerConfig) -> Option<StatusCode> {
    let (mut head, ()) = req.body(()).unwrap().into_parts();
    check(&mut head, cfg).err().map(|r| r.status)
}

fn get(target: &str) -> hyper::http::request::Builder {
    Request::builder().uri(target).header("host", "h")
}

#[test]
fn a_plain_request_passes() {
    assert_eq!(status(get("/a?b=c"), &cfg()), None);
}

#[test]
fn h1_content_length_over_the_limit_is_413() {
    let mut c = cfg();
    c.limit_request_body = 10;
    assert_eq!(
        status(get("/").method("POST").header("content-length", "11"), &c),
        Some(StatusCode::PAYLOAD_TOO_LARGE)
    );
    assert_eq!(
        status(get("/").method("POST").header("content-length", "10"), &c),
        None
    );
}

fn h2(target: &str) -> hyper::http::request::Builder {
    Request::builder()
        .version(hyper::Version::HTTP_2)
        .uri(format!("https://example.com{target}"))
}

#[test]
fn h2_requests_need_no_host() {
    assert_eq!(status(h2("/a?b=c"), &cfg()), None);
}

#[test]
fn h2_requests_meet_the_same_limits() {
    let c = cfg();
    let long = format!("/{}", "a".repeat(4100));
    assert_eq!(status(h2(&long), &c), Some(StatusCode::URI_TOO_LONG));
    let mut many = h2("/");
    for i in 0..101 {
        many = many.header(format!("x-{i}"), "v");
    }
    assert_eq!(
        status(many, &c),
        Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    );
    let big = h2("/").header("x-big", "v".repeat(8190));
    assert_eq!(
        status(big, &c),
        Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    );
    let mut small = cfg();
    small.limit_request_body = 10;
    let body = h2("/").header("content-length", "11");
    assert_eq!(status(body, &small), Some(StatusCode::PAYLOAD_TOO_LARGE));
}

#[test]
fn h2_host_must_match_the_authority() {
    let c = cfg();
    assert_eq!(status(h2("/").header("host", "example.com"), &c), None);
    assert_eq!(
        status(h2("/").header("host", "evil.example"), &c),
        Some(StatusCode::BAD_REQUEST)
    );
}

#[test]
fn h2_cookie_crumbs_are_joined() {
    let req = h2("/")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .header("cookie", "c=3");
    let (mut head, ()) = req.body(()).unwrap().into_parts();
    assert!(check(&mut head, &cfg()).is_ok());
    let cookies: Vec<_> = head.headers.get_all("cookie").iter().collect();
    assert_eq!(cookies, ["a=1; b=2; c=3"]);
}
