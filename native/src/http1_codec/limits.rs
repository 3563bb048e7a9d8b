//! The limits (request line, field count, field size) and the 4xx an
//! httparse error becomes. Checked on incomplete input too, so that a client
//! that never ends its head is stopped once it passes a limit.

use super::chars::is_token;
use super::error::ParseError;
use super::head::BAD_LINE_END;

/// Gunicorn's limits and meaning: 0 switches a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line in bytes (CRLF excluded) before 414.
    pub request_line: usize,
    /// Most header fields before 431.
    pub fields: usize,
    /// Longest header field line in bytes, CRLF included (as Gunicorn
    /// counts it), before 431.
    pub field_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_line: 4094,
            fields: 100,
            field_size: 8190,
        }
    }
}

pub(super) const TOO_MANY_FIELDS: ParseError = ParseError::new(431, "Too many header fields");
pub(super) const FIELD_TOO_LONG: ParseError = ParseError::new(431, "Header field too long");
pub(super) const LINE_TOO_LONG: ParseError = ParseError::new(414, "Request line too long");

pub(super) fn find_lf(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'\n')
}

pub(super) fn over(limit: usize, len: usize) -> bool {
    limit != 0 && len > limit
}

/// The limits, on a buffer that holds no complete head yet.
pub(super) fn check_incomplete(buf: &[u8], limits: &Limits) -> Result<(), ParseError> {
    let mut pos = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let line_len = |i: usize, pos: usize| -> usize {
        // length of the line [pos, pos+i) without its CR
        if i > 0 && buf[pos + i - 1] == b'\r' {
            i - 1
        } else {
            i
        }
    };
    match find_lf(&buf[pos..]) {
        None => {
            if over(limits.request_line, line_len(buf.len() - pos, pos)) {
                return Err(LINE_TOO_LONG);
            }
            return Ok(());
        }
        Some(i) => {
            if over(limits.request_line, line_len(i, pos)) {
                return Err(LINE_TOO_LONG);
            }
            pos += i + 1;
        }
    }
    let mut count = 0usize;
    loop {
        match find_lf(&buf[pos..]) {
            None => {
                if over(limits.field_size, line_len(buf.len() - pos, pos) + 2) {
                    return Err(FIELD_TOO_LONG);
                }
                // A started line is one more field, unless it is the CR of
                // the blank line that ends the head.
                let started = !buf[pos..].is_empty() && &buf[pos..] != b"\r";
                if started && over(limits.fields, count + 1) {
                    return Err(TOO_MANY_FIELDS);
                }
                return Ok(());
            }
            Some(i) => {
                let len = line_len(i, pos);
                if len == 0 {
                    return Ok(());
                }
                count += 1;
                if over(limits.fields, count) {
                    return Err(TOO_MANY_FIELDS);
                }
                if over(limits.field_size, len + 2) {
                    return Err(FIELD_TOO_LONG);
                }
                pos += i + 1;
            }
        }
    }
}

/// Turns an httparse error into the status and reason the client gets.
pub(super) fn classify(buf: &[u8], e: httparse::Error) -> ParseError {
    match e {
        httparse::Error::Version => version_error(buf),
        httparse::Error::HeaderName => {
            if buf
                .windows(2)
                .any(|w| w[0] == b'\n' && (w[1] == b' ' || w[1] == b'\t'))
            {
                ParseError::bad("Obsolete line folding")
            } else {
                ParseError::bad("Invalid header name")
            }
        }
        httparse::Error::HeaderValue => ParseError::bad("Invalid header value"),
        httparse::Error::NewLine => BAD_LINE_END,
        httparse::Error::Token => {
            let start = buf.iter().position(|&b| b != b'\r' && b != b'\n');
            let method_ok = start.is_some_and(|s| {
                let rest = &buf[s..];
                rest.iter()
                    .position(|&b| b == b' ')
                    .is_some_and(|sp| is_token(&rest[..sp]))
            });
            if method_ok {
                ParseError::bad("Invalid request target")
            } else {
                ParseError::bad("Invalid method")
            }
        }
        _ => ParseError::bad("Invalid request"),
    }
}

/// 505 when the version is well-formed (`HTTP/x.y`) but not 1.0/1.1, 400 when
/// it is not a version at all.
fn version_error(buf: &[u8]) -> ParseError {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(0);
    let rest = &buf[start..];
    let (line, complete) = match find_lf(rest) {
        Some(i) => (rest[..i].strip_suffix(b"\r").unwrap_or(&rest[..i]), true),
        None => (rest, false),
    };
    let mut parts = line.splitn(3, |&b| b == b' ');
    let version = parts.nth(2).unwrap_or(b"");
    const SHAPE: &[u8] = b"HTTP/0.0";
    let fits = |v: &[u8]| {
        v.iter().zip(SHAPE).all(|(&b, &s)| match s {
            b'0' => b.is_ascii_digit(),
            _ => b == s,
        })
    };
    let well_formed = if complete {
        version.len() == SHAPE.len() && fits(version)
    } else {
        version.len() <= SHAPE.len() && fits(version)
    };
    if well_formed {
        ParseError::new(505, "HTTP version not supported")
    } else {
        ParseError::bad("Invalid HTTP version")
    }
}
