//! An application's response fields, checked once by its adapter and kept
//! as bytes (`AppFields`): the direct HTTP/1.1 loops frame them with
//! `http1_codec`'s head builder, hyper and h3 get them as a header map.
//! Either way the same fields go out (`AppFields::sent`): framing and
//! connection fields are the server's own, except that `Connection: close`
//! from the app is honoured. An Error is what the caller raises in the app.

use hyper::header::{HeaderName, HeaderValue};
use hyper::HeaderMap;

pub use crate::http1_codec::INVISIBLE_VALUE;
use crate::http1_codec::{check_field, check_visible_field, AppField};

/// A status line (WSGI's, as the app wrote it; empty for ASGI, whose status
/// is a number) and the fields, in one buffer: two allocations a response,
/// where a pair of vectors per field and a header map made six or more for
/// a two-field answer.
#[derive(Default, Clone)]
pub struct AppFields {
    bytes: Vec<u8>,
    status_end: usize,
    /// Per field: where its name and its value end in `bytes` (each starts
    /// where the one before ended), and what it means to the server.
    ends: Vec<(usize, usize, AppField)>,
    /// The Content-Length the app gave, once checked by `push_checked`.
    length: Option<u64>,
}

impl AppFields {
    pub fn new(status_line: &[u8], fields: usize) -> Self {
        let mut bytes = Vec::with_capacity(status_line.len() + 32 * fields.max(2));
        bytes.extend_from_slice(status_line);
        AppFields {
            bytes,
            status_end: status_line.len(),
            ends: Vec::with_capacity(fields),
            length: None,
        }
    }

    pub fn status_line(&self) -> &[u8] {
        &self.bytes[..self.status_end]
    }

    /// A field of the app's, checked as every adapter checks one (a bad one
    /// raises in the app): `check_field`'s rule, and a Content-Length that
    /// agrees with any before it. Kept with its name as given, or
    /// lower-cased (`push_lower`).
    pub fn push_checked(
        &mut self,
        name: &[u8],
        value: &[u8],
        lower: bool,
    ) -> Result<AppField, &'static str> {
        let kind = check_field(name, value)?;
        self.push_kind(name, value, kind, lower)
    }

    /// `push_checked` under `check_visible_field`'s rule, which the adapters
    /// that may answer on HTTP/2 use: `Err(INVISIBLE_VALUE)` for a value
    /// hyper's map would refuse.
    pub fn push_visible(
        &mut self,
        name: &[u8],
        value: &[u8],
        lower: bool,
    ) -> Result<AppField, &'static str> {
        let kind = check_visible_field(name, value)?;
        self.push_kind(name, value, kind, lower)
    }

    fn push_kind(
        &mut self,
        name: &[u8],
        value: &[u8],
        kind: AppField,
        lower: bool,
    ) -> Result<AppField, &'static str> {
        if let AppField::ContentLength(n) = kind {
            if self.length.is_some_and(|prev| prev != n) {
                return Err("conflicting Content-Length headers");
            }
            self.length = Some(n);
        }
        if lower {
            self.push_lower(name, value, kind);
        } else {
            self.push(name, value, kind);
        }
        Ok(kind)
    }

    /// The app's Content-Length, from the fields `push_checked` took.
    pub fn length(&self) -> Option<u64> {
        self.length
    }

    /// A field `h1::check_field` passed as `kind`, its name as given.
    pub fn push(&mut self, name: &[u8], value: &[u8], kind: AppField) {
        self.bytes.extend_from_slice(name);
        self.push_value(value, kind);
    }

    /// The same, the name lower-cased, as hyper's map would hold it: what
    /// the engine's ASGI and RSGI apps always put on the wire.
    pub fn push_lower(&mut self, name: &[u8], value: &[u8], kind: AppField) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.bytes[start..].make_ascii_lowercase();
        self.push_value(value, kind);
    }

    fn push_value(&mut self, value: &[u8], kind: AppField) {
        let name_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((name_end, self.bytes.len(), kind));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Every field as given, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8], AppField)> {
        let mut at = self.status_end;
        self.ends.iter().map(move |&(name_end, value_end, kind)| {
            let field = (
                &self.bytes[at..name_end],
                &self.bytes[name_end..value_end],
                kind,
            );
            at = value_end;
            field
        })
    }

    /// What goes out of a `code` response (`sent`).
    pub fn sent(&self, code: u16) -> impl Iterator<Item = (&[u8], &[u8], AppField)> {
        sent(code, self.fields())
    }

    /// The fields in hyper's map, for HTTP/2 and HTTP/3.
    pub fn header_map(&self, code: u16) -> Result<HeaderMap, String> {
        header_map(code, self.fields())
    }
}

/// The fields of a `code` response that go out: a Content-Length once and
/// never on 1xx/204 (RFC 9110 8.6), no hop-by-hop field, and of the app's
/// Connection fields only a `close`, as one `connection: close`.
pub fn sent<'a>(
    code: u16,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8], AppField)>,
) -> impl Iterator<Item = (&'a [u8], &'a [u8], AppField)> {
    let mut seen_length = false;
    let mut closed = false;
    fields.filter_map(move |(name, value, kind)| match kind {
        AppField::ContentLength(_) => {
            let first = !seen_length && !(100..200).contains(&code) && code != 204;
            seen_length = true;
            first.then_some((name, value, kind))
        }
        AppField::HopByHop => None,
        AppField::Connection { close: true } if !closed => {
            closed = true;
            Some((&b"connection"[..], &b"close"[..], kind))
        }
        AppField::Connection { .. } => None,
        AppField::Date | AppField::Server | AppField::Other => Some((name, value, kind)),
    })
}

pub fn header_map<'a>(
    code: u16,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8], AppField)>,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value, _) in sent(code, fields) {
        let invalid = |e: &str| format!("{e}: {:?}", String::from_utf8_lossy(name));
        let name = HeaderName::from_bytes(name).map_err(|_| invalid("invalid header name"))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| invalid("invalid header value"))?;
        map.append(name, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> AppFields {
        let mut f = AppFields::new(b"", pairs.len());
        for (n, v) in pairs {
            let kind = check_field(n.as_bytes(), v.as_bytes()).unwrap();
            f.push_lower(n.as_bytes(), v.as_bytes(), kind);
        }
        f
    }

    fn sent_of(f: &AppFields, code: u16) -> Vec<(String, String)> {
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        f.sent(code).map(|(n, v, _)| (text(n), text(v))).collect()
    }

    #[test]
    fn the_server_frames_and_a_close_is_kept() {
        let f = fields(&[
            ("Content-Type", "text/plain"),
            ("Content-Length", "4"),
            ("content-length", "5"),
            ("Transfer-Encoding", "chunked"),
            ("Connection", "keep-alive"),
            ("Connection", "Close"),
            ("X-A", "1"),
        ]);
        let expected = [
            ("content-type", "text/plain"),
            ("content-length", "4"),
            ("connection", "close"),
            ("x-a", "1"),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(sent_of(&f, 200), expected);
        let map = f.header_map(200).unwrap();
        assert_eq!(map.len(), 4);
        assert_eq!(map["content-length"], "4");
        assert_eq!(map["connection"], "close");
    }

    #[test]
    fn two_lengths_must_agree() {
        let mut f = AppFields::new(b"", 2);
        assert!(f.push_checked(b"Content-Length", b"2", true).is_ok());
        assert!(f.push_checked(b"content-length", b"2", true).is_ok());
        assert_eq!(f.length(), Some(2));
        let err = f.push_checked(b"content-length", b"3", true).unwrap_err();
        assert_eq!(err, "conflicting Content-Length headers");
        assert!(f.push_checked(b"bad name", b"v", true).is_err());
    }

    #[test]
    fn no_length_on_204() {
        let f = fields(&[("Content-Length", "0"), ("X-A", "1")]);
        assert_eq!(sent_of(&f, 204), [("x-a".to_string(), "1".to_string())]);
    }

    #[test]
    fn a_status_line_leads() {
        let mut f = AppFields::new(b"200 OK", 1);
        f.push(b"X-Case", b"v", AppField::Other);
        assert_eq!(f.status_line(), b"200 OK");
        assert_eq!(f.fields().next().unwrap().0, b"X-Case");
    }
}
