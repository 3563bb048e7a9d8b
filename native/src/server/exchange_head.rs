//! A request's head as it crosses to the answerer, in the form its parser
//! left it: the direct HTTP/1.1 loop's `http1_codec::RequestHead` as it is,
//! hyper's and h3's requests as hyper's `Parts`.
//!
//! The direct loop once converted every head into `Parts` (a method, a `Uri`
//! and a `HeaderMap`: two validations and a hash a field), which the bridge
//! then read back field by field into a list: about 3,000 instructions of an
//! ASGI GET on the engine, and a sixth of an RSGI one's Rust. `http1_codec`
//! had already checked all of it, and accepts nothing that `http` refuses
//! (its target tests say so), so the head goes over as it was parsed.
//!
//! Readers ask through the methods here (and `FieldsOf` for the fields),
//! which answer the same for either form: names lower-case, values as
//! received, the absolute-form target's authority winning over Host.

use std::borrow::Cow;

use hyper::header::{AsHeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::{HeaderMap, Version};

use crate::http1_codec::{self, RequestHead};

pub enum ExchangeHead {
    /// Parsed by `http1_codec` on the direct HTTP/1.1 loop; no map is built.
    Wire(RequestHead),
    /// Parsed by hyper (HTTP/1.1 after a hand-over, HTTP/2) or h3.
    Hyper(Parts),
}

impl ExchangeHead {
    pub fn method(&self) -> &str {
        match self {
            // A method is a token (`http1_codec` checked): ASCII.
            ExchangeHead::Wire(h) => std::str::from_utf8(h.method()).unwrap_or_default(),
            ExchangeHead::Hyper(p) => p.method.as_str(),
        }
    }

    pub fn version(&self) -> Version {
        match self {
            ExchangeHead::Wire(h) => match h.version {
                http1_codec::Version::Http10 => Version::HTTP_10,
                http1_codec::Version::Http11 => Version::HTTP_11,
            },
            ExchangeHead::Hyper(p) => p.version,
        }
    }

    /// The path as received, undecoded ("/" when a target has none).
    pub fn raw_path(&self) -> &[u8] {
        match self {
            ExchangeHead::Wire(h) => h.raw_path(),
            ExchangeHead::Hyper(p) => p.uri.path().as_bytes(),
        }
    }

    /// The query after '?', undecoded; empty without one.
    pub fn query(&self) -> &[u8] {
        match self {
            ExchangeHead::Wire(h) => h.query(),
            ExchangeHead::Hyper(p) => p.uri.query().unwrap_or("").as_bytes(),
        }
    }

    /// The target's authority (absolute form, HTTP/2's `:authority`), else
    /// the Host field.
    pub fn authority(&self) -> Option<&[u8]> {
        match self {
            ExchangeHead::Wire(h) => h.host(),
            ExchangeHead::Hyper(p) => match p.uri.authority() {
                Some(a) => Some(a.as_str().as_bytes()),
                None => p.headers.get(hyper::header::HOST).map(|v| v.as_bytes()),
            },
        }
    }

    /// Path and query as a client would write them (for a repr).
    pub fn target(&self) -> Cow<'_, str> {
        match self {
            ExchangeHead::Wire(h) => String::from_utf8_lossy(h.target()),
            ExchangeHead::Hyper(p) => match p.uri.path_and_query() {
                Some(pq) => Cow::Borrowed(pq.as_str()),
                None => Cow::Owned(p.uri.to_string()),
            },
        }
    }

    pub fn fields(&self) -> FieldsOf<'_> {
        match self {
            ExchangeHead::Wire(h) => FieldsOf::Wire(h),
            ExchangeHead::Hyper(p) => FieldsOf::Map(&p.headers),
        }
    }

    /// The fields alone, for an object that outlives this head's reader.
    pub fn owned_fields(&self) -> OwnedFields {
        match self {
            ExchangeHead::Wire(h) => OwnedFields::Wire(h.clone()),
            ExchangeHead::Hyper(p) => OwnedFields::Map(p.headers.clone()),
        }
    }
}

/// A head's fields, read the same whichever parser made them.
#[derive(Clone, Copy)]
pub enum FieldsOf<'a> {
    Wire(&'a RequestHead),
    Map(&'a HeaderMap),
}

impl<'a> FieldsOf<'a> {
    /// The first value of `name` (lower-case: a `HeaderName`, or a `str`).
    pub fn get<'n, N>(self, name: &'n N) -> Option<&'n [u8]>
    where
        'a: 'n,
        N: AsRef<[u8]> + ?Sized,
        &'n N: AsHeaderName,
    {
        self.all(name).next()
    }

    /// Every value of `name` (lower-case), in the order received.
    pub fn all<'n, N>(self, name: &'n N) -> Values<'n>
    where
        'a: 'n,
        N: AsRef<[u8]> + ?Sized,
        &'n N: AsHeaderName,
    {
        match self {
            FieldsOf::Wire(head) => Values::Wire {
                head,
                name: name.as_ref(),
                next: 0,
            },
            // A `HeaderName` is hashed as it is; a `str` is parsed first.
            FieldsOf::Map(map) => Values::Map(map.get_all(name).iter()),
        }
    }

    /// Every (name, value); a map gives a name's values together.
    pub fn iter(self) -> Fields<'a> {
        match self {
            FieldsOf::Wire(head) => Fields::Wire { head, next: 0 },
            FieldsOf::Map(map) => Fields::Map(map.iter()),
        }
    }

    /// How many fields (repeated names counted each time).
    pub fn len(self) -> usize {
        match self {
            FieldsOf::Wire(head) => head.field_count(),
            FieldsOf::Map(map) => map.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The names, each once, in the order first seen.
    pub fn names(self) -> Vec<&'a [u8]> {
        match self {
            FieldsOf::Map(map) => map.keys().map(|k| k.as_str().as_bytes()).collect(),
            FieldsOf::Wire(_) => {
                let mut names: Vec<&[u8]> = Vec::with_capacity(self.len());
                for (name, _) in self.iter() {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                names
            }
        }
    }
}

pub enum Values<'a> {
    Wire {
        head: &'a RequestHead,
        name: &'a [u8],
        next: usize,
    },
    Map(hyper::header::ValueIter<'a, HeaderValue>),
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Values::Wire { head, name, next } => {
                while *next < head.field_count() {
                    let (n, v) = head.field(*next);
                    *next += 1;
                    if n == *name {
                        return Some(v);
                    }
                }
                None
            }
            Values::Map(values) => values.next().map(|v| v.as_bytes()),
        }
    }
}

pub enum Fields<'a> {
    Wire { head: &'a RequestHead, next: usize },
    Map(hyper::header::Iter<'a, HeaderValue>),
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Fields::Wire { head, next } => {
                let field = (*next < head.field_count()).then(|| head.field(*next));
                *next += 1;
                field
            }
            Fields::Map(fields) => fields
                .next()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        }
    }
}

/// A head's fields, owned: RSGI's `scope.headers` keeps them past the scope.
pub enum OwnedFields {
    Wire(RequestHead),
    Map(HeaderMap),
}

impl OwnedFields {
    pub fn view(&self) -> FieldsOf<'_> {
        match self {
            OwnedFields::Wire(h) => FieldsOf::Wire(h),
            OwnedFields::Map(m) => FieldsOf::Map(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1_codec::Limits;
    use hyper::header::HeaderName;

    const HEAD: &[u8] = b"GET /a%20b?q=1 HTTP/1.1\r\nHost: h.example\r\nX-Two: 1\r\n\
        Accept: */*\r\nx-two: 2\r\n\r\n";

    fn wire() -> ExchangeHead {
        let (head, _) = http1_codec::parse_request(HEAD, &Limits::default())
            .unwrap()
            .unwrap();
        ExchangeHead::Wire(head)
    }

    fn hyper_of(raw: &[u8]) -> ExchangeHead {
        let mut slots = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut slots);
        req.parse(raw).unwrap();
        let mut b = hyper::Request::builder()
            .method(req.method.unwrap())
            .uri(req.path.unwrap());
        for h in req.headers.iter() {
            b = b.header(h.name, h.value);
        }
        ExchangeHead::Hyper(b.body(()).unwrap().into_parts().0)
    }

    #[test]
    fn both_forms_read_alike() {
        let two = HeaderName::from_static("x-two");
        for head in [wire(), hyper_of(HEAD)] {
            assert_eq!(head.method(), "GET");
            assert_eq!(head.version(), Version::HTTP_11);
            assert_eq!(head.raw_path(), b"/a%20b");
            assert_eq!(head.query(), b"q=1");
            assert_eq!(head.authority(), Some(&b"h.example"[..]));
            assert_eq!(head.target(), "/a%20b?q=1");
            let fields = head.fields();
            assert_eq!(fields.len(), 4);
            assert_eq!(fields.get(&two), Some(&b"1"[..]));
            assert_eq!(fields.all(&two).collect::<Vec<_>>(), [b"1", b"2"]);
            assert_eq!(fields.get(&hyper::header::EXPECT), None);
            assert_eq!(fields.get("accept"), Some(&b"*/*"[..]));
            assert_eq!(
                fields.names(),
                [&b"host"[..], &b"x-two"[..], &b"accept"[..]]
            );
            assert!(fields.iter().any(|f| f == (&b"accept"[..], &b"*/*"[..])));
            assert_eq!(head.owned_fields().view().len(), 4);
        }
    }

    #[test]
    fn an_absolute_target_names_the_authority() {
        let raw = b"GET http://t.example/p HTTP/1.1\r\nHost: h.example\r\n\r\n";
        let (head, _) = http1_codec::parse_request(raw, &Limits::default())
            .unwrap()
            .unwrap();
        let wire = ExchangeHead::Wire(head);
        assert_eq!(wire.authority(), Some(&b"t.example"[..]));
        assert_eq!(wire.raw_path(), b"/p");
        assert_eq!(hyper_of(raw).authority(), Some(&b"t.example"[..]));
    }
}
