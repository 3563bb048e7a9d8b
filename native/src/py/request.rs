//! `RequestParser` and `Request`: the head is parsed and kept in Rust; Python
//! objects are made only for what the worker asks for, and the WSGI environ is
//! filled from Rust with interned keys (`environ.rs`, shared with the native
//! engine).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use super::asgi_scope::{self, ScopeRepeats};
use super::environ::{self, method_str};
use super::errors::to_pyerr;
use super::repeats::{EnvironRepeats, Repeats};
use super::text::{latin1, with_bytes};
use crate::http1_codec::{parse_request, Limits, ParseError, RequestHead, Version};

/// Parses request heads under fixed limits (one parser per worker).
#[pyclass(module = "supervise._native", frozen)]
pub struct RequestParser {
    limits: Limits,
}

#[pymethods]
impl RequestParser {
    #[new]
    #[pyo3(signature = (limit_request_line = 4094, limit_request_fields = 100, limit_request_field_size = 8190))]
    fn new(
        limit_request_line: usize,
        limit_request_fields: usize,
        limit_request_field_size: usize,
    ) -> Self {
        RequestParser {
            limits: Limits {
                request_line: limit_request_line,
                fields: limit_request_fields,
                field_size: limit_request_field_size,
            },
        }
    }

    /// `(Request, head_length)` once `buf` holds a whole head, `None` while it
    /// is incomplete; `ParseError` when invalid or over a limit.
    fn parse(&self, py: Python<'_>, buf: &Bound<'_, PyAny>) -> PyResult<Option<(Request, usize)>> {
        with_bytes(buf, |b| self.parse_head(b))?.map_err(|e| to_pyerr(py, e))
    }

    #[getter]
    fn limit_request_line(&self) -> usize {
        self.limits.request_line
    }

    #[getter]
    fn limit_request_fields(&self) -> usize {
        self.limits.fields
    }

    #[getter]
    fn limit_request_field_size(&self) -> usize {
        self.limits.field_size
    }
}

impl RequestParser {
    /// `parse` for Rust callers: the error as the codec gives it, no exception made.
    pub(crate) fn parse_head(&self, buf: &[u8]) -> Result<Option<(Request, usize)>, ParseError> {
        Ok(parse_request(buf, &self.limits)?.map(|(head, n)| (Request::new(head), n)))
    }
}

/// One parsed request head (immutable).
#[pyclass(module = "supervise._native", frozen)]
pub struct Request {
    head: RequestHead,
    headers: PyOnceLock<Py<PyList>>,
}

impl Request {
    /// `fill_asgi_scope`, its values from `repeats` where the connection's
    /// last request had the same (the asgi worker's connection keeps one).
    pub(crate) fn fill_asgi_scope_from(
        &self,
        scope: &Bound<'_, PyDict>,
        root_path: &str,
        http: bool,
        repeats: &mut ScopeRepeats,
    ) -> PyResult<()> {
        let headers = self.headers_from(scope.py(), repeats)?;
        asgi_scope::fill(scope, &self.head, root_path, http, Some(headers), repeats)
    }

    /// The header list, made once; its pairs from `repeats` where the
    /// connection's last request had the same.
    fn headers_from<'py>(
        &self,
        py: Python<'py>,
        repeats: &mut ScopeRepeats,
    ) -> PyResult<Bound<'py, PyList>> {
        if let Some(list) = self.headers.get(py) {
            return Ok(list.bind(py).clone());
        }
        let list = asgi_scope::header_list(py, &self.head, repeats)?;
        Ok(self
            .headers
            .get_or_init(py, || list.unbind())
            .bind(py)
            .clone())
    }

    fn new(head: RequestHead) -> Self {
        Request {
            head,
            headers: PyOnceLock::new(),
        }
    }

    pub(crate) fn head(&self) -> &RequestHead {
        &self.head
    }
}

#[pymethods]
impl Request {
    #[getter]
    fn method<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        method_str(py, self.head.method())
    }

    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        latin1(py, self.head.target())
    }

    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        latin1(py, self.head.path())
    }

    #[getter]
    fn raw_path<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.head.raw_path())
    }

    #[getter]
    fn query<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        latin1(py, self.head.query())
    }

    #[getter]
    fn http_version<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        match self.head.version {
            Version::Http11 => intern!(py, "1.1").clone(),
            Version::Http10 => intern!(py, "1.0").clone(),
        }
    }

    /// `[(name, value), ...]`, names lower-cased, built once on first use
    /// (the ASGI scope's list: `asgi_scope::header_list`).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.headers_from(py, &mut ScopeRepeats::none())
    }

    #[getter]
    fn content_length(&self) -> Option<u64> {
        self.head.content_length
    }

    #[getter]
    fn chunked(&self) -> bool {
        self.head.chunked
    }

    #[getter]
    fn keep_alive(&self) -> bool {
        self.head.keep_alive
    }

    #[getter]
    fn expect_continue(&self) -> bool {
        self.head.expect_continue
    }

    #[getter]
    fn upgrade<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyString>>> {
        self.head.upgrade().map(|u| latin1(py, u)).transpose()
    }

    #[getter]
    fn host<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyString>>> {
        self.head.host().map(|h| latin1(py, h)).transpose()
    }

    /// The fields among `names` (lower-case byte strings) that the request
    /// carries, as `{name: value}` in latin-1 text with a repeated field's
    /// values joined by ","; None when it carries none of them. The proxy
    /// rules look for a few names on every request from a trusted peer, and
    /// most carry none: one pass here, not a Python loop over every field.
    pub(crate) fn fields_named<'py>(
        &self,
        py: Python<'py>,
        names: &Bound<'py, PyTuple>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let wanted = names
            .iter()
            .map(|name| name.cast_into::<PyBytes>().map_err(PyErr::from))
            .collect::<PyResult<Vec<_>>>()?;
        let mut found: Option<Bound<'py, PyDict>> = None;
        for (name, value) in self.head.fields() {
            let Some(key) = wanted
                .iter()
                .map(|w| w.as_bytes())
                .find(|w| name.eq_ignore_ascii_case(w))
            else {
                continue;
            };
            let dict = found.get_or_insert_with(|| PyDict::new(py));
            let key = latin1(py, key)?;
            let text = match dict.get_item(&key)? {
                Some(before) => {
                    let before = before.cast_into::<PyString>()?;
                    format!("{},{}", before.to_str()?, latin1(py, value)?.to_str()?)
                }
                None => latin1(py, value)?.to_str()?.to_owned(),
            };
            dict.set_item(key, text)?;
        }
        Ok(found)
    }

    /// First value of the field `name` (matched case-insensitively).
    fn header<'py>(&self, py: Python<'py>, name: &[u8]) -> Option<Bound<'py, PyBytes>> {
        self.head.header(name).map(|v| PyBytes::new(py, v))
    }

    /// A new dict: a copy of `base` plus everything this request defines;
    /// its values from `repeats` where the connection's last request had
    /// the same (py/repeats.rs).
    #[pyo3(signature = (base, repeats=None))]
    fn wsgi_environ<'py>(
        &self,
        base: &Bound<'py, PyDict>,
        repeats: Option<PyRefMut<'_, EnvironRepeats>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let env = base.copy()?;
        match repeats {
            Some(mut kept) => environ::fill(&env, &self.head, &mut kept.0)?,
            None => environ::fill(&env, &self.head, &mut Repeats::none())?,
        }
        Ok(env)
    }

    /// Adds this request's ASGI scope keys to `scope` (which holds the
    /// connection's); `http` False for a WebSocket scope, which has no method.
    pub(crate) fn fill_asgi_scope(
        &self,
        scope: &Bound<'_, PyDict>,
        root_path: &str,
        http: bool,
    ) -> PyResult<()> {
        self.fill_asgi_scope_from(scope, root_path, http, &mut ScopeRepeats::none())
    }

    fn __repr__(&self) -> String {
        format!(
            "<Request {} {} HTTP/{}>",
            String::from_utf8_lossy(self.head.method()),
            String::from_utf8_lossy(self.head.target()),
            self.head.version.as_str()
        )
    }
}
