//! `response_head` and `set_server_header` for Python.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use super::text::latin1_bytes;
use crate::h1::{self, ResponseHeadBuilder};

/// `(head, content_length, chunked, keep_alive)`; content_length is the number
/// of body bytes to send (0 when no body is allowed) or -1 when the body is
/// delimited by chunked framing or by closing the connection.
#[pyfunction]
pub fn response_head<'py>(
    py: Python<'py>,
    status: &Bound<'py, PyString>,
    headers: &Bound<'py, PyAny>,
    http_version: &str,
    keep_alive: bool,
    is_head: bool,
) -> PyResult<(Bound<'py, PyBytes>, i64, bool, bool)> {
    let http11 = match http_version {
        "1.1" => true,
        "1.0" => false,
        _ => return Err(PyValueError::new_err("http_version must be '1.1' or '1.0'")),
    };
    let status = latin1_bytes(status, "status")?;
    let mut b = ResponseHeadBuilder::new(&status, http11, keep_alive, is_head).map_err(|e| {
        PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(&status)))
    })?;
    for item in headers.try_iter()? {
        let item = item?;
        let pair = item
            .cast::<PyTuple>()
            .map_err(|_| PyTypeError::new_err("headers must be (name, value) tuples"))?;
        if pair.len() != 2 {
            return Err(PyValueError::new_err(
                "headers must be (name, value) tuples",
            ));
        }
        let (name, value) = (pair.get_borrowed_item(0)?, pair.get_borrowed_item(1)?);
        let (Ok(name), Ok(value)) = (name.cast::<PyString>(), value.cast::<PyString>()) else {
            return Err(PyTypeError::new_err("header names and values must be str"));
        };
        let name_b = latin1_bytes(&name, "header name")?;
        let value_b = latin1_bytes(&value, "header value")?;
        b.header(&name_b, &value_b).map_err(|e| {
            PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(&name_b)))
        })?;
    }
    let head = b.finish();
    Ok((
        PyBytes::new(py, &head.bytes),
        head.content_length,
        head.chunked,
        head.keep_alive,
    ))
}

/// Sets the Server header every response gets; `None` sends none.
#[pyfunction]
#[pyo3(signature = (value))]
pub fn set_server_header(value: Option<&Bound<'_, PyString>>) -> PyResult<()> {
    let bytes = value
        .map(|v| latin1_bytes(v, "Server header"))
        .transpose()?;
    h1::set_server_header(bytes.as_deref()).map_err(PyValueError::new_err)
}
