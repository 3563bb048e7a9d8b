//! hyper's request head seen as `py::environ` reads heads: the same keys for
//! a request whichever server parsed it. HTTP/1.1 heads were checked by `http1_codec`
//! on the raw bytes before hyper saw them (server/precheck_io.rs); HTTP/2 ones
//! by h2 and `strict::check_h2`.

use std::borrow::Cow;

use hyper::http::request::Parts;
use hyper::Version;

use crate::http1_codec::target::percent_decode;
use crate::http1_codec::RequestHead;
use crate::py::environ::HeadView;
use crate::server::ExchangeHead;

pub struct HyperHead<'a> {
    parts: &'a Parts,
    target: Cow<'a, str>,
    path: Cow<'a, [u8]>,
    raw_path: &'a str,
    fields: Vec<(&'a [u8], &'a [u8])>,
    host: Option<&'a [u8]>,
}

impl<'a> HyperHead<'a> {
    pub fn new(parts: &'a Parts) -> Self {
        let uri = &parts.uri;
        // HTTP/3's heads are HTTP/2's in form (RFC 9114 4.3).
        let h2 = parts.version >= Version::HTTP_2;
        let connect = parts.method == hyper::Method::CONNECT;
        // HTTP/1.1: an absolute-form target is kept whole (RAW_URI) and its
        // authority wins over Host (RFC 9112 3.2.2); HTTP/2: :authority
        // stands for Host when the client sent none (RFC 9113 8.3.1).
        let absolute = !h2 && uri.scheme().is_some();
        let target: Cow<'a, str> = if connect && !h2 {
            uri.authority()
                .map_or(Cow::Borrowed(""), |a| Cow::Borrowed(a.as_str()))
        } else if absolute {
            Cow::Owned(uri.to_string())
        } else {
            Cow::Borrowed(uri.path_and_query().map_or("/", |pq| pq.as_str()))
        };
        let raw_path = if connect { "" } else { uri.path() };
        let fields: Vec<_> = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        let authority = uri.authority().map(|a| a.as_str().as_bytes());
        let wins = if h2 {
            !parts.headers.contains_key(hyper::header::HOST)
        } else {
            absolute || connect
        };
        let host = authority.filter(|_| wins);
        HyperHead {
            parts,
            target,
            path: percent_decode(raw_path.as_bytes()),
            raw_path,
            fields,
            host,
        }
    }
}

impl HeadView for HyperHead<'_> {
    fn method(&self) -> &[u8] {
        self.parts.method.as_str().as_bytes()
    }
    fn target(&self) -> &[u8] {
        self.target.as_bytes()
    }
    fn path(&self) -> &[u8] {
        &self.path
    }
    fn raw_path(&self) -> &[u8] {
        self.raw_path.as_bytes()
    }
    fn query(&self) -> &[u8] {
        self.parts.uri.query().unwrap_or("").as_bytes()
    }
    fn protocol(&self) -> &'static str {
        match self.parts.version {
            Version::HTTP_10 => "HTTP/1.0",
            Version::HTTP_2 => "HTTP/2",
            Version::HTTP_3 => "HTTP/3",
            _ => "HTTP/1.1",
        }
    }
    fn field_count(&self) -> usize {
        self.fields.len()
    }
    fn field(&self, i: usize) -> (&[u8], &[u8]) {
        self.fields[i]
    }
    fn host_override(&self) -> Option<&[u8]> {
        self.host
    }
}

/// An exchange's head seen through `HeadView`, whichever parser made it: the
/// direct loop's `RequestHead` is one already.
pub enum RequestView<'a> {
    Wire(&'a RequestHead),
    Hyper(HyperHead<'a>),
}

impl<'a> RequestView<'a> {
    pub fn of(head: &'a ExchangeHead) -> Self {
        match head {
            ExchangeHead::Wire(h) => RequestView::Wire(h),
            ExchangeHead::Hyper(p) => RequestView::Hyper(HyperHead::new(p)),
        }
    }
}

impl RequestView<'_> {
    fn inner(&self) -> &dyn HeadView {
        match self {
            RequestView::Wire(h) => *h,
            RequestView::Hyper(h) => h,
        }
    }
}

impl HeadView for RequestView<'_> {
    fn method(&self) -> &[u8] {
        self.inner().method()
    }
    fn target(&self) -> &[u8] {
        self.inner().target()
    }
    fn path(&self) -> &[u8] {
        self.inner().path()
    }
    fn raw_path(&self) -> &[u8] {
        self.inner().raw_path()
    }
    fn query(&self) -> &[u8] {
        self.inner().query()
    }
    fn protocol(&self) -> &'static str {
        self.inner().protocol()
    }
    fn field_count(&self) -> usize {
        self.inner().field_count()
    }
    fn field(&self, i: usize) -> (&[u8], &[u8]) {
        self.inner().field(i)
    }
    fn host_override(&self) -> Option<&[u8]> {
        self.inner().host_override()
    }
}
