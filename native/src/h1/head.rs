//! The request head: httparse does the tokenising (SIMD, no allocation), then
//! the checks httparse leaves to us turn an ambiguous head into a 4xx before
//! any app sees it: line endings, limits, framing (Content-Length /
//! Transfer-Encoding), Host, method spelling and the request-target form.

use std::mem::MaybeUninit;
use std::ops::Range;

use super::chars::{is_token, list_items, parse_decimal};
use super::error::{ParseError, Result};
use super::target::{parse_target, percent_decode, valid_authority, TargetForm};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "1.0",
            Version::Http11 => "1.1",
        }
    }
}

/// A byte range inside `RequestHead::buf`; u32 keeps a field at 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn new(r: Range<usize>) -> Self {
        // Heads are bounded by the limits (and by the worker's buffer); a head
        // over 4 GiB cannot reach this point.
        Span {
            start: r.start as u32,
            end: r.end as u32,
        }
    }

    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Debug, Clone, Copy)]
struct Field {
    name: Span,
    value: Span,
}

/// A validated request head. Owns one copy of the head bytes (field names
/// lower-cased in place); everything else is offsets into it, so building it
/// costs two allocations whatever the number of fields.
#[derive(Debug, Clone)]
pub struct RequestHead {
    buf: Box<[u8]>,
    method: Span,
    target: Span,
    path: Span,
    query: Span,
    decoded_path: Option<Box<[u8]>>,
    fields: Vec<Field>,
    upgrade: Option<Span>,
    host: Option<Span>,
    pub form: TargetForm,
    pub version: Version,
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub keep_alive: bool,
    pub expect_continue: bool,
}

impl RequestHead {
    fn slice(&self, s: Span) -> &[u8] {
        &self.buf[s.range()]
    }

    pub fn method(&self) -> &[u8] {
        self.slice(self.method)
    }

    /// The request-target exactly as received (RAW_URI).
    pub fn target(&self) -> &[u8] {
        self.slice(self.target)
    }

    /// The undecoded path: "/" for an absolute-form target without one, ""
    /// for CONNECT, "*" for `OPTIONS *`.
    pub fn raw_path(&self) -> &[u8] {
        if self.form == TargetForm::Absolute && self.path.start == self.path.end {
            b"/"
        } else {
            self.slice(self.path)
        }
    }

    /// The percent-decoded path (PATH_INFO before SCRIPT_NAME is removed).
    pub fn path(&self) -> &[u8] {
        match &self.decoded_path {
            Some(p) => p,
            None => self.raw_path(),
        }
    }

    /// The query string after '?', undecoded, without a fragment.
    pub fn query(&self) -> &[u8] {
        self.slice(self.query)
    }

    /// Host to route on: the authority of an absolute-form or CONNECT target
    /// (RFC 9112 3.2.2 says it wins over the Host header), else Host.
    pub fn host(&self) -> Option<&[u8]> {
        self.host.map(|s| self.slice(s))
    }

    /// True when `host()` comes from the target and not from the Host field.
    pub fn host_from_target(&self) -> bool {
        matches!(self.form, TargetForm::Absolute | TargetForm::Authority)
    }

    /// The Upgrade value, only when Connection lists "upgrade".
    pub fn upgrade(&self) -> Option<&[u8]> {
        self.upgrade.map(|s| self.slice(s))
    }

    pub fn field_count(&self) -> usize {
        self.fields.len()
    }

    /// (lower-case name, value) of the field at `i`, in received order.
    pub fn field(&self, i: usize) -> (&[u8], &[u8]) {
        let f = self.fields[i];
        (self.slice(f.name), self.slice(f.value))
    }

    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields
            .iter()
            .map(|f| (self.slice(f.name), self.slice(f.value)))
    }

    /// First value of the field `name` (any case).
    pub fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.fields()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

const STACK_FIELDS: usize = 64;

const BAD_LINE_END: ParseError = ParseError::bad("Invalid line ending");
const TOO_MANY_FIELDS: ParseError = ParseError::new(431, "Too many header fields");
const FIELD_TOO_LONG: ParseError = ParseError::new(431, "Header field too long");
const LINE_TOO_LONG: ParseError = ParseError::new(414, "Request line too long");

/// Parses the head at the start of `buf`.
///
/// `Ok(None)`: incomplete, read more. `Ok(Some((head, n)))`: the head is the
/// first `n` bytes (through the blank line). A limit that the incomplete
/// buffer already exceeds is an error at once, so a client sending an endless
/// line or endless fields is stopped as soon as it crosses the limit.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Option<(RequestHead, usize)>> {
    let mut slots = match limits.fields {
        0 => STACK_FIELDS,
        n => n.min(STACK_FIELDS),
    };
    let mut stack = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; STACK_FIELDS];
    let mut heap: Vec<MaybeUninit<httparse::Header<'_>>> = Vec::new();
    loop {
        let slots_buf: &mut [MaybeUninit<httparse::Header<'_>>] = if slots <= STACK_FIELDS {
            &mut stack[..slots]
        } else {
            heap.resize_with(slots, MaybeUninit::uninit);
            &mut heap[..]
        };
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(buf, slots_buf) {
            Ok(httparse::Status::Complete(n)) => {
                return build(buf, n, &req, limits).map(|h| Some((h, n)))
            }
            Ok(httparse::Status::Partial) => {
                check_incomplete(buf, limits)?;
                return Ok(None);
            }
            Err(httparse::Error::TooManyHeaders) => {
                if limits.fields != 0 && slots >= limits.fields {
                    return Err(TOO_MANY_FIELDS);
                }
                slots = match limits.fields {
                    0 => slots * 4,
                    n => (slots * 4).min(n),
                };
            }
            Err(e) => {
                // A limit crossed earlier in the buffer is the better answer
                // (the client must shorten its request, not fix a byte).
                check_incomplete(buf, limits)?;
                return Err(classify(buf, e));
            }
        }
    }
}

fn find_lf(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'\n')
}

fn over(limit: usize, len: usize) -> bool {
    limit != 0 && len > limit
}

/// The limits, on a buffer that holds no complete head yet.
fn check_incomplete(buf: &[u8], limits: &Limits) -> Result<()> {
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
fn classify(buf: &[u8], e: httparse::Error) -> ParseError {
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

fn offset(buf: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - buf.as_ptr() as usize
}

/// Codings we can let through ahead of the final chunked: the app sees them in
/// HTTP_TRANSFER_ENCODING and gets the payload de-chunked but not decoded.
fn known_coding(c: &[u8]) -> bool {
    [
        &b"identity"[..],
        b"gzip",
        b"x-gzip",
        b"deflate",
        b"compress",
        b"x-compress",
    ]
    .iter()
    .any(|k| c.eq_ignore_ascii_case(k))
}

fn build(
    buf: &[u8],
    n: usize,
    req: &httparse::Request<'_, '_>,
    limits: &Limits,
) -> Result<RequestHead> {
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ParseError::bad("Invalid request"));
    };
    let method_start = offset(buf, method.as_bytes());
    let target_start = offset(buf, target.as_bytes());
    let target_end = target_start + target.len();

    // Line endings: httparse takes a bare LF as a line end; RFC 9112 lets a
    // server do so, and smuggling lives in that gap, so every line must end
    // in CRLF. Bare CR is already an httparse error.
    if !buf[..method_start].chunks(2).all(|c| c == b"\r\n") {
        return Err(BAD_LINE_END);
    }
    let line_end = target_end + 9; // " HTTP/1.x"
    if buf.get(line_end..line_end + 2) != Some(b"\r\n") || &buf[n - 2..n] != b"\r\n" {
        return Err(BAD_LINE_END);
    }
    if over(limits.request_line, line_end - method_start) {
        return Err(LINE_TOO_LONG);
    }

    let mut head = buf[..n].to_vec().into_boxed_slice();
    let mut fields = Vec::with_capacity(req.headers.len());
    for (i, h) in req.headers.iter().enumerate() {
        let start = offset(buf, h.name.as_bytes());
        let next = match req.headers.get(i + 1) {
            Some(next) => offset(buf, next.name.as_bytes()),
            None => n - 2,
        };
        if &buf[next - 2..next] != b"\r\n" {
            return Err(BAD_LINE_END);
        }
        if over(limits.field_size, next - start) {
            return Err(FIELD_TOO_LONG);
        }
        let name = start..start + h.name.len();
        head[name.clone()].make_ascii_lowercase();
        let value_start = if h.value.is_empty() {
            next - 2
        } else {
            offset(buf, h.value)
        };
        fields.push(Field {
            name: Span::new(name),
            value: Span::new(value_start..value_start + h.value.len()),
        });
    }
    if req.headers.is_empty() && n != line_end + 4 {
        return Err(BAD_LINE_END);
    }

    let method_b = method.as_bytes();
    if method_b.iter().any(u8::is_ascii_lowercase) {
        // Methods are case-sensitive and every registered one is upper-case;
        // "get" is a client bug or a probe (Gunicorn refuses it too).
        return Err(ParseError::bad("Invalid method"));
    }
    let version = if minor == 1 {
        Version::Http11
    } else {
        Version::Http10
    };
    let t = parse_target(method_b, target.as_bytes())?;
    let shift = |r: Range<usize>| Span::new(r.start + target_start..r.end + target_start);

    let mut content_length = None;
    let mut te_seen = false;
    let mut chunked_seen = false;
    let mut last_chunked = false;
    let mut unknown_coding = false;
    let mut host = None;
    let mut content_type_seen = false;
    let (mut close, mut keep, mut conn_upgrade) = (false, false, false);
    let mut expect_continue = false;
    let mut upgrade = None;
    for f in &fields {
        let value = &head[f.value.range()];
        match &head[f.name.range()] {
            b"content-length" => {
                // Even an identical repeat is refused: two framing fields mean
                // two parsers may disagree somewhere on the path.
                if content_length.is_some() {
                    return Err(ParseError::bad("Duplicate Content-Length"));
                }
                content_length = Some(
                    parse_decimal(value, i64::MAX as u64)
                        .ok_or(ParseError::bad("Invalid Content-Length"))?,
                );
            }
            b"transfer-encoding" => {
                te_seen = true;
                for coding in list_items(value) {
                    if !is_token(coding) {
                        return Err(ParseError::bad("Invalid Transfer-Encoding"));
                    }
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        if chunked_seen {
                            return Err(ParseError::bad("chunked applied twice"));
                        }
                        chunked_seen = true;
                        last_chunked = true;
                    } else {
                        last_chunked = false;
                        unknown_coding |= !known_coding(coding);
                    }
                }
            }
            b"host" => {
                if host.is_some() {
                    return Err(ParseError::bad("Duplicate Host header"));
                }
                if !value.is_empty() && !valid_authority(value, false) {
                    return Err(ParseError::bad("Invalid Host header"));
                }
                host = Some(f.value);
            }
            b"content-type" => {
                if content_type_seen {
                    return Err(ParseError::bad("Duplicate Content-Type"));
                }
                content_type_seen = true;
            }
            b"connection" => {
                for opt in list_items(value) {
                    close |= opt.eq_ignore_ascii_case(b"close");
                    keep |= opt.eq_ignore_ascii_case(b"keep-alive");
                    conn_upgrade |= opt.eq_ignore_ascii_case(b"upgrade");
                }
            }
            b"expect" => expect_continue |= value.eq_ignore_ascii_case(b"100-continue"),
            b"upgrade" if upgrade.is_none() => upgrade = Some(f.value),
            _ => {}
        }
    }
    if te_seen {
        if version == Version::Http10 {
            return Err(ParseError::bad("Transfer-Encoding on HTTP/1.0"));
        }
        if content_length.is_some() {
            return Err(ParseError::bad("Content-Length with Transfer-Encoding"));
        }
        if !last_chunked {
            return Err(ParseError::bad("Transfer-Encoding must end in chunked"));
        }
        if unknown_coding {
            return Err(ParseError::new(501, "Unsupported Transfer-Encoding"));
        }
    }
    if version == Version::Http11 && host.is_none() {
        return Err(ParseError::bad("Missing Host header"));
    }

    let path = shift(t.path);
    let decoded_path = match percent_decode(&head[path.range()]) {
        std::borrow::Cow::Owned(p) => Some(p.into_boxed_slice()),
        std::borrow::Cow::Borrowed(_) => None,
    };
    let keep_alive = match version {
        Version::Http11 => !close,
        Version::Http10 => keep && !close,
    };
    Ok(RequestHead {
        method: Span::new(method_start..method_start + method.len()),
        target: Span::new(target_start..target_end),
        path,
        query: shift(t.query),
        decoded_path,
        upgrade: if conn_upgrade { upgrade } else { None },
        host: match t.authority {
            Some(a) => Some(shift(a)),
            None => host,
        },
        form: t.form,
        version,
        content_length,
        chunked: te_seen,
        keep_alive,
        expect_continue: expect_continue && version == Version::Http11,
        fields,
        buf: head,
    })
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
