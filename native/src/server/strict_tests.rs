use std::time::Duration;

use hyper::{Request, StatusCode};

use super::check;
use crate::server::{RuntimeMode, ServerConfig};

fn cfg() -> ServerConfig {
    ServerConfig {
        threads: 1,
        mode: RuntimeMode::St,
        header_timeout: Some(Duration::from_secs(10)),
        keepalive: Some(Duration::from_secs(2)),
        limit_request_line: 4094,
        limit_request_fields: 100,
        limit_request_field_size: 8190,
        limit_request_body: 0,
        date_header: true,
        server_header: None,
        scheme: "http",
        ws: None,
    }
}

fn status(req: hyper::http::request::Builder, cfg: &ServerConfig) -> Option<StatusCode> {
    let (head, ()) = req.body(()).unwrap().into_parts();
    check(&head, cfg).err().map(|r| r.status)
}

fn get(target: &str) -> hyper::http::request::Builder {
    Request::builder().uri(target).header("host", "h")
}

#[test]
fn a_plain_request_passes() {
    assert_eq!(status(get("/a?b=c"), &cfg()), None);
}

#[test]
fn h1_rules_apply_to_hyper_heads() {
    let c = cfg();
    assert_eq!(
        status(get("/").method("get"), &c),
        Some(StatusCode::BAD_REQUEST)
    );
    assert_eq!(
        status(Request::builder().uri("/"), &c),
        Some(StatusCode::BAD_REQUEST)
    ); // no Host
    assert_eq!(
        status(get("/").header("host", "other"), &c),
        Some(StatusCode::BAD_REQUEST)
    );
    assert_eq!(status(get("*"), &c), Some(StatusCode::BAD_REQUEST)); // asterisk-form is OPTIONS only
    assert_eq!(
        status(get("/").header("transfer-encoding", "br, chunked"), &c),
        Some(StatusCode::NOT_IMPLEMENTED)
    );
}

#[test]
fn limits_answer_414_431_413() {
    let mut c = cfg();
    c.limit_request_line = 50;
    assert_eq!(
        status(get(&format!("/{}", "a".repeat(60))), &c),
        Some(StatusCode::URI_TOO_LONG)
    );
    let mut c = cfg();
    c.limit_request_field_size = 40;
    assert_eq!(
        status(get("/").header("x-big", "v".repeat(60)), &c),
        Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    );
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
