//! The RSGI scope of one HTTP request. Attributes are computed when read, so
//! an app pays only for what it looks at; the headers object is built once.

use std::sync::Arc;

use hyper::http::request::Parts;
use hyper::Version;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use super::headers::Headers;
use crate::bridge::Proxied;
use crate::http1_codec::target::percent_decode;
use crate::server::{ConnInfo, ExchangeHead};

pub const RSGI_VERSION: &str = "1.5";

#[pyclass(module = "supervise._native", frozen)]
pub struct Scope {
    head: ExchangeHead,
    conn: Arc<ConnInfo>,
    headers: PyOnceLock<Py<Headers>>,
    websocket: bool,
    /// The client and scheme a trusted proxy's headers gave (forwarded.rs).
    proxied: Proxied,
}

impl Scope {
    pub fn new(head: ExchangeHead, conn: Arc<ConnInfo>, proxied: Proxied) -> Self {
        Scope {
            head,
            conn,
            headers: PyOnceLock::new(),
            websocket: false,
            proxied,
        }
    }

    /// The scope of a WebSocket session (`proto` "ws").
    pub fn websocket(head: Parts, conn: Arc<ConnInfo>, proxied: Proxied) -> Self {
        Scope {
            websocket: true,
            ..Scope::new(ExchangeHead::Hyper(head), conn, proxied)
        }
    }

    pub fn head(&self) -> &ExchangeHead {
        &self.head
    }

    /// The client's "addr:port", a trusted proxy's if it named one.
    pub fn client_text(&self) -> &str {
        self.proxied.client.as_deref().unwrap_or(&self.conn.client)
    }

    pub fn method_str(&self) -> &str {
        self.head.method()
    }

    pub fn target(&self) -> String {
        self.head.target().into_owned()
    }

    pub fn version_str(&self) -> &'static str {
        match self.head.version() {
            Version::HTTP_10 => "1.0",
            Version::HTTP_2 => "2",
            Version::HTTP_3 => "3",
            Version::HTTP_09 => "0.9",
            _ => "1.1",
        }
    }
}

#[pymethods]
impl Scope {
    #[getter]
    fn proto<'py>(&self, py: Python<'py>) -> &Bound<'py, PyString> {
        if self.websocket {
            intern!(py, "ws")
        } else {
            intern!(py, "http")
        }
    }

    #[getter]
    fn rsgi_version(&self) -> &'static str {
        RSGI_VERSION
    }

    #[getter]
    fn http_version(&self) -> &'static str {
        self.version_str()
    }

    #[getter]
    fn scheme(&self) -> &str {
        self.proxied.scheme.as_deref().unwrap_or(self.conn.scheme)
    }

    #[getter]
    fn method(&self) -> &str {
        self.head.method()
    }

    /// Percent-decoded, as UTF-8 (invalid sequences replaced).
    #[getter]
    fn path(&self) -> String {
        String::from_utf8_lossy(&percent_decode(self.head.raw_path())).into_owned()
    }

    /// The target checked every byte: ASCII, so this is never lossy.
    #[getter]
    fn query_string(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.head.query())
    }

    #[getter]
    fn authority(&self) -> Option<String> {
        self.head
            .authority()
            .map(|a| String::from_utf8_lossy(a).into_owned())
    }

    #[getter]
    fn client(&self) -> &str {
        self.client_text()
    }

    #[getter]
    fn server(&self) -> &str {
        &self.conn.server
    }

    #[getter]
    fn headers(&self, py: Python<'_>) -> PyResult<Py<Headers>> {
        let h = self
            .headers
            .get_or_try_init(py, || Py::new(py, Headers::new(self.head.owned_fields())))?;
        Ok(h.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        format!("<Scope {} {}>", self.method_str(), self.target())
    }
}
