//! Response heads: the status line and fields an app gave, validated (a CR or
//! LF in an app's header would let request data split our response), plus the
//! framing the server owns: Date, Server, Content-Length / chunked / close.

use std::sync::RwLock;

use super::chars::{is_field_vchar, is_token, parse_decimal, trim_ows};
use super::date::http_date_now;

static SERVER: RwLock<Option<Vec<u8>>> = RwLock::new(None);
static DATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
static SERVER_SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const DEFAULT_SERVER: &[u8] = b"supervise";

/// Value of the Server header the server adds; `None` sends none.
pub fn set_server_header(value: Option<&[u8]>) -> Result<(), &'static str> {
    if let Some(v) = value {
        if v.iter().any(|&b| !is_field_vchar(b)) {
            return Err("invalid Server header value");
        }
    }
    let mut guard = SERVER.write().unwrap_or_else(|e| e.into_inner());
    *guard = value.map(<[u8]>::to_vec);
    SERVER_SET.store(true, std::sync::atomic::Ordering::Release);
    Ok(())
}

static ALT_SVC: RwLock<Option<Vec<u8>>> = RwLock::new(None);
static ALT_SVC_SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Value of the Alt-Svc field added to responses that carry none (HTTP/3's
/// advertisement, on the native server); `None` adds none.
pub fn set_alt_svc(value: Option<&[u8]>) -> Result<(), &'static str> {
    if value.is_some_and(|v| v.iter().any(|&b| !is_field_vchar(b))) {
        return Err("invalid Alt-Svc value");
    }
    let mut guard = ALT_SVC.write().unwrap_or_else(|e| e.into_inner());
    *guard = value.map(<[u8]>::to_vec);
    ALT_SVC_SET.store(guard.is_some(), std::sync::atomic::Ordering::Release);
    Ok(())
}

/// Whether responses get a Date header the app did not set (RFC 9110 6.6.1
/// wants one from a server with a clock; a proxy in front may add its own).
pub fn set_date_header(on: bool) {
    DATE.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn with_server<R>(f: impl FnOnce(Option<&[u8]>) -> R) -> R {
    if !SERVER_SET.load(std::sync::atomic::Ordering::Acquire) {
        return f(Some(DEFAULT_SERVER));
    }
    let guard = SERVER.read().unwrap_or_else(|e| e.into_inner());
    f(guard.as_deref())
}

/// The standard reason phrase of a status code ("" for codes without one).
pub fn reason_phrase(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        207 => "Multi-Status",
        208 => "Already Reported",
        226 => "IM Used",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        305 => "Use Proxy",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a Teapot",
        421 => "Misdirected Request",
        422 => "Unprocessable Entity",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        506 => "Variant Also Negotiates",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        510 => "Not Extended",
        511 => "Network Authentication Required",
        _ => "",
    }
}

/// A WSGI status ("200 OK", or "200"): the code and the reason phrase.
pub fn parse_status(status: &[u8]) -> Result<(u16, &[u8]), &'static str> {
    let (code, reason) = match status {
        [a, b, c] => ([*a, *b, *c], &b""[..]),
        [a, b, c, b' ', reason @ ..] => ([*a, *b, *c], reason),
        _ => return Err("status must be 'NNN Reason'"),
    };
    if !code.iter().all(u8::is_ascii_digit) || code[0] == b'0' {
        return Err("status code must be 3 digits from 100 to 999");
    }
    if reason.iter().any(|&b| !is_field_vchar(b)) {
        return Err("invalid character in status reason");
    }
    Ok((
        code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0')),
        reason,
    ))
}

/// What an application's response field means to the server. Every server
/// here (the Python workers' heads and the native engine's hyper responses)
/// applies the same rules through this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppField {
    Date,
    Server,
    ContentLength(u64),
    /// Transfer-Encoding, Keep-Alive: the server frames the message, not the app.
    HopByHop,
    /// `close` when the value lists "close".
    Connection {
        close: bool,
    },
    Other,
}

const INVALID_NAME: &str = "invalid header name";
const SPLITS_HEAD: &str = "header value contains CR, LF or NUL";
/// What `check_visible_field` refuses that `check_field` takes.
pub const INVISIBLE_VALUE: &str = "invalid header value";

/// Checks one field an application gave (a CR, LF or NUL would let request
/// data split the response) and says what it means.
pub fn check_field(name: &[u8], value: &[u8]) -> Result<AppField, &'static str> {
    if !is_token(name) {
        return Err(INVALID_NAME);
    }
    if value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(SPLITS_HEAD);
    }
    field_kind(name, value)
}

/// `check_field`, and a value made only of visible bytes, spaces and tabs
/// (what hyper's `HeaderValue` takes, so that a field refused on HTTP/2 is
/// refused on every protocol): one scan of the value for both rules, the
/// same error as the two checks one after the other.
pub fn check_visible_field(name: &[u8], value: &[u8]) -> Result<AppField, &'static str> {
    if !is_token(name) {
        return Err(INVALID_NAME);
    }
    if !value
        .iter()
        .all(|&b| (b >= 0x20 && b != 0x7f) || b == b'\t')
    {
        let splits = value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0));
        return Err(if splits { SPLITS_HEAD } else { INVISIBLE_VALUE });
    }
    field_kind(name, value)
}

/// What a field means, for a name and value already known to be valid (a
/// token, no CR, LF or NUL): `check_field` without its scans, for fields
/// that come out of a `HeaderMap`, whose types refused anything else.
pub fn field_kind(name: &[u8], value: &[u8]) -> Result<AppField, &'static str> {
    Ok(match name.len() {
        4 if name_is(name, b"date") => AppField::Date,
        6 if name_is(name, b"server") => AppField::Server,
        14 if name_is(name, b"content-length") => AppField::ContentLength(
            parse_decimal(trim_ows(value), i64::MAX as u64).ok_or("invalid Content-Length")?,
        ),
        17 if name_is(name, b"transfer-encoding") => AppField::HopByHop,
        10 if name_is(name, b"keep-alive") => AppField::HopByHop,
        10 if name_is(name, b"connection") => AppField::Connection {
            close: value
                .split(|&b| b == b',')
                .any(|t| trim_ows(t).eq_ignore_ascii_case(b"close")),
        },
        _ => AppField::Other,
    })
}

/// How a response's body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// The response can carry none (HEAD, 1xx, 204, 304).
    NoBody,
    /// Exactly this many bytes: the Content-Length.
    Length(u64),
    /// The chunked coding (HTTP/1.1 without a length).
    Chunked,
    /// Until the connection closes (HTTP/1.0 without a length).
    UntilClose,
}

impl BodyFraming {
    /// The most body bytes that may go out; `None`: no bound.
    pub fn limit(self) -> Option<u64> {
        match self {
            BodyFraming::NoBody => Some(0),
            BodyFraming::Length(n) => Some(n),
            BodyFraming::Chunked | BodyFraming::UntilClose => None,
        }
    }

    /// The Python workers' `(content_length, chunked)`: -1 for no bound.
    pub fn as_python(self) -> (i64, bool) {
        let length = self.limit().map_or(-1, |n| n as i64);
        (length, self == BodyFraming::Chunked)
    }
}

/// What the caller must do with the body after writing `bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub bytes: Vec<u8>,
    pub framing: BodyFraming,
    pub keep_alive: bool,
}

impl ResponseHead {
    pub fn chunked(&self) -> bool {
        self.framing == BodyFraming::Chunked
    }

    /// How much of a body of `len` bytes goes out: none where the response
    /// can carry none, never more than its Content-Length.
    pub fn body_bytes(&self, len: usize) -> usize {
        self.framing.limit().map_or(len, |max| {
            len.min(usize::try_from(max).unwrap_or(usize::MAX))
        })
    }

    /// Whether `sent` body bytes are all the head announced (always, for a
    /// body delimited by chunking or the close).
    pub fn complete(&self, sent: u64) -> bool {
        self.framing.limit().is_none_or(|n| n == sent)
    }
}

/// A chunk's size line ("1f4\r\n") on the stack: written per chunk, so no
/// formatting machinery and no allocation.
pub struct ChunkSize {
    buf: [u8; 18],
    start: usize,
}

impl ChunkSize {
    pub fn new(mut n: usize) -> Self {
        let mut buf = [0u8; 18];
        buf[16] = b'\r';
        buf[17] = b'\n';
        let mut start = 16;
        loop {
            start -= 1;
            buf[start] = b"0123456789abcdef"[n & 0xf];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        ChunkSize { buf, start }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// Builds a head field by field, so the caller converts each app header
/// straight into the buffer without an intermediate list.
#[derive(Debug)]
pub struct ResponseHeadBuilder {
    buf: Vec<u8>,
    code: u16,
    http11: bool,
    keep_alive: bool,
    body_allowed: bool,
    /// A HEAD request's answer to a status that has a body: no body goes
    /// out, but its length does, as the GET's would (RFC 9110 9.3.2).
    head_of_body: bool,
    content_length: Option<u64>,
    has_date: bool,
    has_server: bool,
    has_alt_svc: bool,
}

fn name_is(name: &[u8], lower: &[u8]) -> bool {
    name.eq_ignore_ascii_case(lower)
}

impl ResponseHeadBuilder {
    /// `status` is the WSGI status ("200 OK"); `http11` tells whether the
    /// request was HTTP/1.1 (chunked is allowed) or 1.0.
    pub fn new(
        status: &[u8],
        http11: bool,
        keep_alive: bool,
        is_head: bool,
    ) -> Result<Self, &'static str> {
        let (code_n, reason) = parse_status(status)?;
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(b"HTTP/1.1 ");
        buf.extend_from_slice(&status[..3]);
        buf.push(b' ');
        buf.extend_from_slice(reason);
        buf.extend_from_slice(b"\r\n");
        let no_body = (100..200).contains(&code_n) || code_n == 204 || code_n == 304;
        Ok(ResponseHeadBuilder {
            buf,
            code: code_n,
            http11,
            keep_alive,
            body_allowed: !no_body && !is_head,
            head_of_body: !no_body && is_head,
            content_length: None,
            has_date: false,
            has_server: false,
            has_alt_svc: false,
        })
    }

    /// The status code, checked by `new`.
    pub fn code(&self) -> u16 {
        self.code
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        let kind = check_field(name, value)?;
        self.checked_header(name, value, kind)
    }

    /// `header` for a field `check_field` already passed as `kind` (the WSGI
    /// engine checks each in `start_response`, where a bad one raises in the
    /// app): checked once per request, not twice.
    pub fn checked_header(
        &mut self,
        name: &[u8],
        value: &[u8],
        kind: AppField,
    ) -> Result<(), &'static str> {
        match kind {
            AppField::Date => self.has_date = true,
            AppField::Server => self.has_server = true,
            AppField::Other if name.eq_ignore_ascii_case(b"alt-svc") => self.has_alt_svc = true,
            AppField::ContentLength(n) => {
                match self.content_length {
                    Some(prev) if prev != n => return Err("conflicting Content-Length headers"),
                    Some(_) => return Ok(()),
                    None => self.content_length = Some(n),
                }
                if (100..200).contains(&self.code) || self.code == 204 {
                    // RFC 9110 8.6: never on 1xx/204.
                    return Ok(());
                }
            }
            AppField::HopByHop => return Ok(()),
            AppField::Connection { close } => {
                if close {
                    self.keep_alive = false;
                }
                if self.code != 101 {
                    return Ok(());
                }
            }
            AppField::Other => {}
        }
        self.push(name, value);
        Ok(())
    }

    pub fn finish(self) -> ResponseHead {
        self.finish_with_length(None)
    }

    /// Like `finish`, for a caller that already holds the whole body: without
    /// a Content-Length from the app, `body_length` becomes one (no chunked
    /// framing for a body whose size is known).
    pub fn finish_with_length(mut self, body_length: Option<u64>) -> ResponseHead {
        if (self.body_allowed || self.head_of_body) && self.content_length.is_none() {
            if let Some(n) = body_length {
                self.push(b"Content-Length", n.to_string().as_bytes());
                self.content_length = Some(n);
            }
        }
        let framing = if !self.body_allowed {
            BodyFraming::NoBody
        } else if let Some(n) = self.content_length {
            BodyFraming::Length(n)
        } else if self.http11 {
            self.buf
                .extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            BodyFraming::Chunked
        } else {
            // HTTP/1.0 without a length: the end of the body is the close.
            self.keep_alive = false;
            BodyFraming::UntilClose
        };
        if !self.keep_alive {
            self.buf.extend_from_slice(b"Connection: close\r\n");
        } else if !self.http11 {
            self.buf.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        if !self.has_date && DATE.load(std::sync::atomic::Ordering::Relaxed) {
            self.push(b"Date", &http_date_now());
        }
        if !self.has_server {
            let mut buf = std::mem::take(&mut self.buf);
            with_server(|s| {
                if let Some(s) = s {
                    buf.extend_from_slice(b"Server: ");
                    buf.extend_from_slice(s);
                    buf.extend_from_slice(b"\r\n");
                }
            });
            self.buf = buf;
        }
        if !self.has_alt_svc && ALT_SVC_SET.load(std::sync::atomic::Ordering::Acquire) {
            let guard = ALT_SVC.read().unwrap_or_else(|e| e.into_inner());
            if let Some(value) = guard.as_deref() {
                self.buf.extend_from_slice(b"Alt-Svc: ");
                self.buf.extend_from_slice(value);
                self.buf.extend_from_slice(b"\r\n");
            }
        }
        self.buf.extend_from_slice(b"\r\n");
        ResponseHead {
            bytes: self.buf,
            framing,
            keep_alive: self.keep_alive,
        }
    }
}

#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
