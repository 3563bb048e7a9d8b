//! `start_response` and the `write()` it returns. The status and fields are
//! checked as the Python workers check them (`h1::check_field`) and kept as
//! bytes (`server::app_fields::AppFields`): HTTP/1.1 frames them with `http1_codec`'s head builder
//! (direct_response.rs), HTTP/2 turns them into hyper's header map.

use bytes::Bytes;
use hyper::{HeaderMap, StatusCode};
use pyo3::exceptions::{PyAssertionError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use crate::http1_codec::parse_status;
use crate::py::response::{for_each_wsgi_field, start_response_rules};
use crate::py::text::latin1_bytes;
use crate::server::app_fields::AppFields;

#[pyclass(module = "supervise._native")]
#[derive(Default)]
pub struct StartResponse {
    /// The status line as the app gave it (the access log prints it).
    pub status: Option<Py<PyString>>,
    pub code: u16,
    /// The status line and the fields as bytes, checked.
    pub head: AppFields,
    /// The app's own list, for the access log's `{name}o` atoms.
    pub app_headers: Option<Py<PyAny>>,
    /// The app's Content-Length: never more body than that is sent.
    pub length: Option<u64>,
    /// Blocks passed to `write()`, sent before what the iterable yields.
    pub written: Vec<Bytes>,
    /// The head left for the client: exc_info can no longer replace it.
    pub committed: bool,
}

impl StartResponse {
    pub fn status_code(&self) -> Option<StatusCode> {
        self.status.as_ref()?;
        StatusCode::from_u16(self.code).ok()
    }
}

/// A body block as PEP 3333 allows it: bytes (bytearray and memoryview are
/// accepted too, as by the Python workers). A large `bytes` is shared, not
/// copied: a hundred clients slow to read an 8 MiB page held 800 MiB of
/// copies, which the allocator kept after they left.
pub fn as_bytes(data: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(crate::py::body_bytes::body_bytes(b));
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(Bytes::from(b.to_vec()));
    }
    if data.is_instance_of::<pyo3::types::PyMemoryView>() {
        let b = data.call_method0(intern!(data.py(), "tobytes"))?;
        return as_bytes(&b);
    }
    Err(PyTypeError::new_err(format!(
        "a WSGI application must send bytes, not {}",
        data.get_type().name()?
    )))
}

/// The app's fields, checked as the Python workers check them (a bad one
/// raises in start_response, where the app can see it); kept as given, for
/// whichever writer frames the response: `http1_codec`'s head builder on HTTP/1.1,
/// hyper's header map on HTTP/2. Also the Content-Length the app gave.
fn checked_head(
    status_line: &[u8],
    headers: &Bound<'_, PyAny>,
) -> PyResult<(AppFields, Option<u64>)> {
    let mut head = AppFields::new(status_line, 4);
    for_each_wsgi_field(headers, |name, value| {
        head.push_checked(name, value, false)
            .map(|_| ())
            .map_err(|e| PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(name))))
    })?;
    let length = head.length();
    Ok((head, length))
}

impl StartResponse {
    /// The fields in hyper's map (`server::app_fields`).
    pub fn header_map(&self) -> PyResult<HeaderMap> {
        self.head
            .header_map(self.code)
            .map_err(PyValueError::new_err)
    }
}

#[pymethods]
impl StartResponse {
    #[pyo3(signature = (status, headers, exc_info = None))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        status: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        exc_info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let (started, committed) = {
            let this = slf.borrow();
            (this.status.is_some(), this.committed)
        };
        let status = &start_response_rules(status, exc_info, started, committed)?;
        let line = latin1_bytes(status, "status")?;
        let (code, _) = parse_status(&line).map_err(|e| {
            PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(&line)))
        })?;
        let (head, length) = checked_head(&line, headers)?;
        let mut this = slf.borrow_mut();
        this.status = Some(status.clone().unbind());
        this.code = code;
        this.head = head;
        this.length = length;
        this.app_headers = Some(headers.clone().unbind());
        drop(this);
        slf.getattr(intern!(py, "write"))
    }

    /// The `write()` callable of PEP 3333. The data waits for the app to
    /// return (one write to the socket), but for the app the head is out:
    /// exc_info can no longer replace it.
    fn write(&mut self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.status.is_none() {
            return Err(PyAssertionError::new_err(
                "write() called before start_response()",
            ));
        }
        let data = as_bytes(data)?;
        if !data.is_empty() {
            self.written.push(data);
            self.committed = true;
        }
        Ok(())
    }
}
