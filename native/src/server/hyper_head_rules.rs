//! The Python workers' parser rules (`http1_codec`) for requests hyper parsed. HTTP/1.1 heads were
//! checked by `http1_codec` on the raw bytes before hyper read them (precheck_io.rs),
//! with every rule and limit of the Python workers; what is left here for
//! them is the body limit (413 from Content-Length, before the app runs).
//!
//! HTTP/2 heads: h2 already refuses what RFC 9113 calls
//! malformed (pseudo-header order and values, upper-case names,
//! connection-specific fields, `te` other than `trailers`, a
//! Content-Length that disagrees with the DATA frames) with a stream reset.
//! `check_h2` adds the same limits as `http1_codec` (414, 431, 413), a 400 for a Host
//! that contradicts `:authority` (RFC 9113 8.3.1), and joins split `cookie`
//! fields into one, as RFC 9113 8.2.3 asks before handing a request on.

use hyper::header::{HeaderValue, CONTENT_LENGTH, COOKIE, HOST};
use hyper::http::request::Parts;
use hyper::{StatusCode, Version};

use super::config::ServerConfig;

pub struct Reject {
    pub status: StatusCode,
    pub reason: &'static str,
}

pub fn check(head: &mut Parts, cfg: &ServerConfig) -> Result<(), Reject> {
    // HTTP/3 heads come through h3, which checks what h2 checks.
    if head.version >= Version::HTTP_2 {
        check_h2(head, cfg)
    } else {
        check_h1(head, cfg)
    }
}

fn reject(status: StatusCode, reason: &'static str) -> Reject {
    Reject { status, reason }
}

fn check_body_limit(length: Option<u64>, cfg: &ServerConfig) -> Result<(), Reject> {
    match length {
        Some(n) if cfg.limit_request_body != 0 && n > cfg.limit_request_body => Err(reject(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body too large",
        )),
        _ => Ok(()),
    }
}

fn check_h2(head: &mut Parts, cfg: &ServerConfig) -> Result<(), Reject> {
    let target = head.uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    // As `http1_codec` counts "METHOD TARGET HTTP/1.1".
    let line = head.method.as_str().len() + 1 + target + 9;
    if cfg.limit_request_line != 0 && line > cfg.limit_request_line {
        return Err(reject(StatusCode::URI_TOO_LONG, "Request-URI Too Long"));
    }
    join_cookies(&mut head.headers);
    let headers = &head.headers;
    if cfg.limit_request_fields != 0 && headers.len() > cfg.limit_request_fields {
        return Err(reject(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "Too many header fields",
        ));
    }
    if cfg.limit_request_field_size != 0
        && headers
            .iter()
            .any(|(n, v)| n.as_str().len() + 2 + v.len() + 2 > cfg.limit_request_field_size)
    {
        return Err(reject(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "Header field too large",
        ));
    }
    if let (Some(authority), Some(host)) = (head.uri.authority(), headers.get(HOST)) {
        if !authority
            .as_str()
            .as_bytes()
            .eq_ignore_ascii_case(host.as_bytes())
        {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                "Host differs from :authority",
            ));
        }
    }
    // h2 has checked that the DATA frames add up to it.
    let length = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    check_body_limit(length, cfg)
}

/// One `cookie` field out of the crumbs HTTP/2 clients may split it into.
fn join_cookies(headers: &mut hyper::HeaderMap) {
    let mut crumbs = headers.get_all(COOKIE).iter();
    let (Some(first), Some(_)) = (crumbs.next(), crumbs.next()) else {
        return;
    };
    let mut joined = first.as_bytes().to_vec();
    for crumb in headers.get_all(COOKIE).iter().skip(1) {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(crumb.as_bytes());
    }
    // The crumbs were valid field values, and so is "; " between them.
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(COOKIE, value);
    }
}

fn check_h1(head: &Parts, cfg: &ServerConfig) -> Result<(), Reject> {
    // `http1_codec` accepted exactly one Content-Length (or none) on the raw head.
    let length = head
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    check_body_limit(length, cfg)
}

#[cfg(test)]
#[path = "hyper_head_rules_tests.rs"]
mod tests;
