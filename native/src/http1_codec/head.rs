//! The request head: httparse does the tokenising (SIMD, no allocation), then
//! the checks httparse leaves to us turn an ambiguous head into a 4xx before
//! any app sees it: line endings, limits, framing (Content-Length /
//! Transfer-Encoding), Host, method spelling and the request-target form.

use std::mem::MaybeUninit;
use std::ops::Range;

use super::error::{ParseError, Result};
use super::fields::read_fields;
use super::limits::{
    check_incomplete, classify, over, Limits, FIELD_TOO_LONG, LINE_TOO_LONG, TOO_MANY_FIELDS,
};
use super::target::{parse_target, percent_decode, TargetForm};

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
pub(super) struct Span {
    start: u32,
    end: u32,
}

impl Span {
    pub(super) fn new(r: Range<usize>) -> Self {
        // Heads are bounded by the limits (and by the worker's buffer); a head
        // over 4 GiB cannot reach this point.
        Span {
            start: r.start as u32,
            end: r.end as u32,
        }
    }

    pub(super) fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Field {
    pub(super) name: Span,
    pub(super) value: Span,
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

    /// Whether the request asks to leave HTTP/1.1 on its connection: a
    /// CONNECT, or any `Upgrade` field, with or without `Connection:
    /// upgrade`, as hyper takes it.
    pub fn asks_upgrade(&self) -> bool {
        self.method() == b"CONNECT" || self.header(b"upgrade").is_some()
    }
}

const STACK_FIELDS: usize = 64;

pub(super) const BAD_LINE_END: ParseError = ParseError::bad("Invalid line ending");
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

fn offset(buf: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - buf.as_ptr() as usize
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
    let sem = read_fields(&head, &fields, version)?;
    let shift = |r: Range<usize>| Span::new(r.start + target_start..r.end + target_start);

    let path = shift(t.path);
    let decoded_path = match percent_decode(&head[path.range()]) {
        std::borrow::Cow::Owned(p) => Some(p.into_boxed_slice()),
        std::borrow::Cow::Borrowed(_) => None,
    };
    Ok(RequestHead {
        method: Span::new(method_start..method_start + method.len()),
        target: Span::new(target_start..target_end),
        path,
        query: shift(t.query),
        decoded_path,
        upgrade: sem.upgrade,
        host: match t.authority {
            Some(a) => Some(shift(a)),
            None => sem.host,
        },
        form: t.form,
        version,
        content_length: sem.content_length,
        chunked: sem.chunked,
        keep_alive: sem.keep_alive,
        expect_continue: sem.expect_continue,
        fields,
        buf: head,
    })
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
