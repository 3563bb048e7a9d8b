//! DESIGN.md's parser rules for requests hyper already parsed: the head is
//! written back out (request line + fields) and parsed again by `h1`, the
//! parser every Python worker uses, so -k rsgi refuses what they refuse with
//! the same status (400/414/431/501/505), limits included.
//!
//! What this cannot see, because hyper normalised it before we get the head
//! (hyper is more lenient than `h1` there; the next part feeds `h1` the raw
//! bytes instead):
//! - bare LF line ends (httparse accepts them);
//! - Content-Length together with Transfer-Encoding: hyper drops the length
//!   and frames by the chunked coding (no smuggling through us, but a 200
//!   where `h1` answers 400);
//! - repeated identical Content-Length fields, merged by hyper;
//! - the exact bytes of a field (optional whitespace trimmed, names lower-cased),
//!   so `limit_request_field_size` counts `name: value` + CRLF.
//!
//! HTTP/2 heads are not written out: h2 already refuses what RFC 9113 calls
//! malformed (pseudo-header order and values, upper-case names,
//! connection-specific fields, `te` other than `trailers`, a
//! Content-Length that disagrees with the DATA frames) with a stream reset.
//! `check_h2` adds the same limits as `h1` (414, 431, 413), a 400 for a Host
//! that contradicts `:authority` (RFC 9113 8.3.1), and joins split `cookie`
//! fields into one, as RFC 9113 8.2.3 asks before handing a request on.
//!
//! Cost: one small buffer and one `h1` parse per request (about a microsecond
//! for a typical head), paid on the tokio thread, not the loop's.

use hyper::header::{HeaderValue, CONTENT_LENGTH, COOKIE, HOST};
use hyper::http::request::Parts;
use hyper::{StatusCode, Version};

use super::config::ServerConfig;
use crate::h1::{parse_request, Limits};

pub struct Reject {
    pub status: StatusCode,
    pub reason: &'static str,
}

fn version(v: Version) -> &'static [u8] {
    match v {
        Version::HTTP_10 => b"HTTP/1.0",
        Version::HTTP_09 => b"HTTP/0.9",
        _ => b"HTTP/1.1",
    }
}

/// The head as it would have been sent, for `h1`.
fn rewrite(head: &Parts, buf: &mut Vec<u8>) {
    buf.extend_from_slice(head.method.as_str().as_bytes());
    buf.push(b' ');
    match head.uri.path_and_query() {
        Some(pq) if head.uri.scheme().is_none() => buf.extend_from_slice(pq.as_str().as_bytes()),
        _ if head.uri.scheme().is_none() && head.uri.authority().is_some() => {
            // authority-form (CONNECT)
            buf.extend_from_slice(head.uri.authority().map_or("", |a| a.as_str()).as_bytes())
        }
        _ => buf.extend_from_slice(head.uri.to_string().as_bytes()),
    }
    buf.push(b' ');
    buf.extend_from_slice(version(head.version));
    buf.extend_from_slice(b"\r\n");
    for (name, value) in &head.headers {
        buf.extend_from_slice(name.as_str().as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    buf.extend_from_slice(b"\r\n");
}

pub fn check(head: &mut Parts, cfg: &ServerConfig) -> Result<(), Reject> {
    if head.version == Version::HTTP_2 {
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
    // As `h1` counts "METHOD TARGET HTTP/1.1".
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
    let mut buf = Vec::with_capacity(256);
    rewrite(head, &mut buf);
    let limits = Limits {
        request_line: cfg.limit_request_line,
        fields: cfg.limit_request_fields,
        field_size: cfg.limit_request_field_size,
    };
    let parsed = parse_request(&buf, &limits).map_err(|e| Reject {
        status: StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
        reason: e.reason,
    })?;
    let Some((req, _)) = parsed else {
        return Err(Reject {
            status: StatusCode::BAD_REQUEST,
            reason: "Bad Request",
        });
    };
    check_body_limit(req.content_length, cfg)
}

#[cfg(test)]
#[path = "strict_tests.rs"]
mod tests;
