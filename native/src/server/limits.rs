//! Checks hyper does not make (or makes more leniently than DESIGN.md's
//! parser rules), applied to the parsed head before the app sees it.
//!
//! Where hyper is weaker than `h1`:
//! - the request line has no limit of its own in hyper (only the whole head,
//!   `max_buf_size`), so `limit_request_line` is checked here, on the parsed
//!   method + target + version: the 414 comes after hyper buffered the head
//!   (bounded by `max_buf_size`), not while the line is still arriving;
//! - `limit_request_field_size` likewise, per field, after parsing
//!   (`name: value` + CRLF, the optional whitespace hyper trimmed not counted);
//! - hyper accepts Content-Length together with Transfer-Encoding (it ignores
//!   the length) and repeated identical Content-Length fields: both are 400 here,
//!   as request smuggling goes through exactly those.

use hyper::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use hyper::http::request::Parts;
use hyper::StatusCode;

use super::config::ServerConfig;

pub struct Reject {
    pub status: StatusCode,
    pub reason: &'static str,
}

const fn reject(status: StatusCode, reason: &'static str) -> Reject {
    Reject { status, reason }
}

fn over(limit: usize, len: usize) -> bool {
    limit != 0 && len > limit
}

pub fn check(head: &Parts, cfg: &ServerConfig) -> Result<(), Reject> {
    let target_len = match head.uri.path_and_query() {
        Some(pq) if head.uri.scheme().is_none() => pq.as_str().len(),
        _ => head.uri.to_string().len(),
    };
    // "GET " + target + " HTTP/1.1"
    if over(
        cfg.limit_request_line,
        head.method.as_str().len() + 1 + target_len + 9,
    ) {
        return Err(reject(StatusCode::URI_TOO_LONG, "Request line too long"));
    }
    if cfg.limit_request_field_size != 0 {
        for (name, value) in &head.headers {
            if over(
                cfg.limit_request_field_size,
                name.as_str().len() + 2 + value.len() + 2,
            ) {
                return Err(reject(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "Header field too long",
                ));
            }
        }
    }
    let mut lengths = head.headers.get_all(CONTENT_LENGTH).iter();
    let length = lengths.next();
    if length.is_some() && lengths.next().is_some() {
        return Err(reject(StatusCode::BAD_REQUEST, "Invalid Content-Length"));
    }
    if length.is_some() && head.headers.contains_key(TRANSFER_ENCODING) {
        return Err(reject(
            StatusCode::BAD_REQUEST,
            "Content-Length with Transfer-Encoding",
        ));
    }
    if let Some(length) = length {
        let n: u64 = length
            .to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(reject(StatusCode::BAD_REQUEST, "Invalid Content-Length"))?;
        if cfg.limit_request_body != 0 && n > cfg.limit_request_body {
            return Err(reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Request body too large",
            ));
        }
    }
    Ok(())
}
