//! `RequestParser` and `Request`: the head is parsed and kept in Rust; Python
//! objects are made only for what the worker asks for, and the WSGI environ is
//! filled from Rust with interned keys.

use std::collections::BTreeMap;
use std::sync::Mutex;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use super::errors::to_pyerr;
use super::text::{latin1, latin1_bytes, with_bytes};
use crate::h1::{parse_request, Limits, RequestHead, Version};

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
        match with_bytes(buf, |b| parse_request(b, &self.limits))? {
            Ok(Some((head, n))) => Ok(Some((Request::new(head), n))),
            Ok(None) => Ok(None),
            Err(e) => Err(to_pyerr(py, e)),
        }
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

/// One parsed request head (immutable).
#[pyclass(module = "supervise._native", frozen)]
pub struct Request {
    head: RequestHead,
    headers: PyOnceLock<Py<PyList>>,
}

impl Request {
    fn new(head: RequestHead) -> Self {
        Request {
            head,
            headers: PyOnceLock::new(),
        }
    }
}

fn method_str<'py>(py: Python<'py>, m: &[u8]) -> PyResult<Bound<'py, PyString>> {
    Ok(match m {
        b"GET" => intern!(py, "GET").clone(),
        b"POST" => intern!(py, "POST").clone(),
        b"HEAD" => intern!(py, "HEAD").clone(),
        b"PUT" => intern!(py, "PUT").clone(),
        b"DELETE" => intern!(py, "DELETE").clone(),
        b"OPTIONS" => intern!(py, "OPTIONS").clone(),
        b"PATCH" => intern!(py, "PATCH").clone(),
        _ => latin1(py, m)?,
    })
}

fn version_str(py: Python<'_>, v: Version) -> &Bound<'_, PyString> {
    match v {
        Version::Http11 => intern!(py, "1.1"),
        Version::Http10 => intern!(py, "1.0"),
    }
}

/// The environ key for a lower-case field name; `None` for names with "_",
/// which Gunicorn drops too: "X_Forwarded_For" must not pose as
/// HTTP_X_FORWARDED_FOR behind a proxy that only strips the dashed form.
fn http_key<'py>(py: Python<'py>, name: &[u8]) -> Option<Bound<'py, PyString>> {
    macro_rules! known {
        ($($name:literal => $key:literal,)*) => {
            match name {
                $($name => return Some(intern!(py, $key).clone()),)*
                _ => {}
            }
        };
    }
    known! {
        b"host" => "HTTP_HOST",
        b"user-agent" => "HTTP_USER_AGENT",
        b"accept" => "HTTP_ACCEPT",
        b"accept-encoding" => "HTTP_ACCEPT_ENCODING",
        b"accept-language" => "HTTP_ACCEPT_LANGUAGE",
        b"connection" => "HTTP_CONNECTION",
        b"cookie" => "HTTP_COOKIE",
        b"referer" => "HTTP_REFERER",
        b"origin" => "HTTP_ORIGIN",
        b"cache-control" => "HTTP_CACHE_CONTROL",
        b"pragma" => "HTTP_PRAGMA",
        b"authorization" => "HTTP_AUTHORIZATION",
        b"if-none-match" => "HTTP_IF_NONE_MATCH",
        b"if-modified-since" => "HTTP_IF_MODIFIED_SINCE",
        b"x-forwarded-for" => "HTTP_X_FORWARDED_FOR",
        b"x-forwarded-proto" => "HTTP_X_FORWARDED_PROTO",
        b"x-forwarded-host" => "HTTP_X_FORWARDED_HOST",
        b"x-real-ip" => "HTTP_X_REAL_IP",
        b"x-request-id" => "HTTP_X_REQUEST_ID",
        b"transfer-encoding" => "HTTP_TRANSFER_ENCODING",
        b"expect" => "HTTP_EXPECT",
        b"upgrade" => "HTTP_UPGRADE",
        b"upgrade-insecure-requests" => "HTTP_UPGRADE_INSECURE_REQUESTS",
        b"sec-fetch-dest" => "HTTP_SEC_FETCH_DEST",
        b"sec-fetch-mode" => "HTTP_SEC_FETCH_MODE",
        b"sec-fetch-site" => "HTTP_SEC_FETCH_SITE",
        b"sec-fetch-user" => "HTTP_SEC_FETCH_USER",
        b"dnt" => "HTTP_DNT",
    }
    if name.contains(&b'_') {
        return None;
    }
    let mut cache = KEY_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(key) = cache.get(name) {
        return Some(key.bind(py).clone());
    }
    let mut key = String::with_capacity(5 + name.len());
    key.push_str("HTTP_");
    key.extend(name.iter().map(|&b| match b {
        b'-' => '_',
        _ => b.to_ascii_uppercase() as char,
    }));
    if cache.len() >= KEY_CACHE_SIZE {
        // Not interned: interned strings may never be freed (3.12).
        return Some(PyString::new(py, &key));
    }
    let key = PyString::intern(py, &key);
    cache.insert(name.into(), key.clone().unbind());
    Some(key)
}

/// Keys of custom fields an app's clients send again and again (X-Request-Id,
/// X-Amzn-Trace-Id...): built once, then found by name. Bounded, so a client
/// inventing names cannot grow it; past the bound keys are built each time.
const KEY_CACHE_SIZE: usize = 512;
static KEY_CACHE: Mutex<BTreeMap<Box<[u8]>, Py<PyString>>> = Mutex::new(BTreeMap::new());

/// `env[key] = value` without pyo3's generic conversions (this runs ~20 times
/// per request).
#[inline]
fn put(
    env: &Bound<'_, PyDict>,
    key: &Bound<'_, PyString>,
    value: &Bound<'_, PyString>,
) -> PyResult<()> {
    // SAFETY: three valid borrowed references; PyDict_SetItem increments
    // what it stores and returns -1 with an exception set on failure.
    let rc = unsafe { pyo3::ffi::PyDict_SetItem(env.as_ptr(), key.as_ptr(), value.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(env.py()))
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
        version_str(py, self.head.version).clone()
    }

    /// `[(name, value), ...]`, names lower-cased, built once on first use.
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if let Some(list) = self.headers.get(py) {
            return Ok(list.bind(py).clone());
        }
        let items = self.head.fields().map(|(n, v)| {
            PyTuple::new(py, [PyBytes::new(py, n), PyBytes::new(py, v)]).map(Bound::unbind)
        });
        let list = PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?;
        Ok(self
            .headers
            .get_or_init(py, || list.unbind())
            .bind(py)
            .clone())
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

    /// First value of the field `name` (matched case-insensitively).
    fn header<'py>(&self, py: Python<'py>, name: &[u8]) -> Option<Bound<'py, PyBytes>> {
        self.head.header(name).map(|v| PyBytes::new(py, v))
    }

    /// A new dict: a copy of `base` plus everything this request defines.
    fn wsgi_environ<'py>(
        &self,
        py: Python<'py>,
        base: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let head = &self.head;
        let env = base.copy()?;
        put(
            &env,
            intern!(py, "REQUEST_METHOD"),
            &method_str(py, head.method())?,
        )?;

        let mut path = head.path();
        if let Some(script) = base.get_item(intern!(py, "SCRIPT_NAME"))? {
            if let Ok(script) = script.cast::<PyString>() {
                let script = latin1_bytes(script, "SCRIPT_NAME")?;
                let script = script.strip_suffix(b"/").unwrap_or(&script);
                // Only at a segment boundary: "/app" mounts "/app/x", not "/apple".
                if !script.is_empty()
                    && path.starts_with(script)
                    && matches!(path.get(script.len()), None | Some(b'/'))
                {
                    path = &path[script.len()..];
                }
            }
        }
        put(&env, intern!(py, "PATH_INFO"), &latin1(py, path)?)?;
        put(
            &env,
            intern!(py, "QUERY_STRING"),
            &latin1(py, head.query())?,
        )?;
        let raw_uri = latin1(py, head.target())?;
        put(&env, intern!(py, "RAW_URI"), &raw_uri)?;
        put(&env, intern!(py, "REQUEST_URI"), &raw_uri)?;
        let protocol = match head.version {
            Version::Http11 => intern!(py, "HTTP/1.1"),
            Version::Http10 => intern!(py, "HTTP/1.0"),
        };
        put(&env, intern!(py, "SERVER_PROTOCOL"), protocol)?;

        let n = head.field_count();
        for i in 0..n {
            let (name, value) = head.field(i);
            match name {
                b"content-type" => {
                    put(&env, intern!(py, "CONTENT_TYPE"), &latin1(py, value)?)?;
                    continue;
                }
                b"content-length" => {
                    put(&env, intern!(py, "CONTENT_LENGTH"), &latin1(py, value)?)?;
                    continue;
                }
                _ => {}
            }
            // A repeated field was joined when its first line came by.
            if (0..i).any(|j| head.field(j).0 == name) {
                continue;
            }
            let Some(key) = http_key(py, name) else {
                continue;
            };
            let repeats = (i + 1..n).filter(|&j| head.field(j).0 == name);
            let mut joined: Option<Vec<u8>> = None;
            for j in repeats {
                let buf = joined.get_or_insert_with(|| value.to_vec());
                buf.push(b',');
                buf.extend_from_slice(head.field(j).1);
            }
            let value = latin1(py, joined.as_deref().unwrap_or(value))?;
            put(&env, &key, &value)?;
        }
        if head.host_from_target() {
            if let Some(host) = head.host() {
                put(&env, intern!(py, "HTTP_HOST"), &latin1(py, host)?)?;
            }
        }
        Ok(env)
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
