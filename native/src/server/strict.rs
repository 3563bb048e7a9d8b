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
//! Cost: one small buffer and one `h1` parse per request (about a microsecond
//! for a typical head), paid on the tokio thread, not the loop's.

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

pub fn check(head: &Parts, cfg: &ServerConfig) -> Result<(), Reject> {
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
    if let Some(length) = req.content_length {
        if cfg.limit_request_body != 0 && length > cfg.limit_request_body {
            return Err(Reject {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                reason: "Request body too large",
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "strict_tests.rs"]
mod tests;
