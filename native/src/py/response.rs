//! `asgi_response_head`, the WSGI header list's reader, and the Server and
//! Date switches for Python (the WSGI response itself: wsgi_response.rs).

use pyo3::exceptions::{PyAssertionError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::text::latin1_bytes;
use crate::http1_codec::{self, ResponseHeadBuilder};

/// PEP 3333's rules for a call of `start_response`, the same for every WSGI
/// server here: `started` says whether it was called before, `head_sent`
/// whether the head left (then `exc_info` is re-raised with its traceback).
/// The status, checked to be a str.
pub(crate) fn start_response_rules<'py>(
    status: &Bound<'py, PyAny>,
    exc_info: Option<&Bound<'py, PyAny>>,
    started: bool,
    head_sent: bool,
) -> PyResult<Bound<'py, PyString>> {
    match exc_info.filter(|info| !info.is_none()) {
        Some(info) if head_sent => {
            // Too late to replace the response: PEP 3333 says re-raise.
            let py = status.py();
            let raised = info
                .get_item(1)?
                .call_method1(intern!(py, "with_traceback"), (info.get_item(2)?,))?;
            return Err(PyErr::from_value(raised));
        }
        None if started => {
            return Err(PyAssertionError::new_err(
                "start_response() called again without exc_info",
            ));
        }
        _ => {}
    }
    status.cast::<PyString>().cloned().map_err(|_| {
        let shown = status
            .repr()
            .map_or_else(|_| "?".to_owned(), |r| r.to_string());
        PyTypeError::new_err(format!(
            "status must be a str such as '200 OK', not {shown}"
        ))
    })
}

/// `f(name, value)` for each field of a WSGI header list (`(str, str)`
/// tuples, latin-1 as PEP 3333 says), for every server that frames one.
pub fn for_each_wsgi_field(
    headers: &Bound<'_, PyAny>,
    mut f: impl FnMut(&[u8], &[u8]) -> PyResult<()>,
) -> PyResult<()> {
    // A list (nearly every app's) by index: no iterator object per response.
    if let Ok(list) = headers.cast::<PyList>() {
        for item in list.iter() {
            wsgi_field(&item, &mut f)?;
        }
        return Ok(());
    }
    for item in headers.try_iter()? {
        wsgi_field(&item?, &mut f)?;
    }
    Ok(())
}

fn wsgi_field(
    item: &Bound<'_, PyAny>,
    f: &mut impl FnMut(&[u8], &[u8]) -> PyResult<()>,
) -> PyResult<()> {
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
    f(
        &latin1_bytes(&name, "header name")?,
        &latin1_bytes(&value, "header value")?,
    )
}

/// The same for an ASGI `http.response.start`: an int status and an iterable
/// of `[name, value]` byte strings (tuples or lists, as the spec allows).
/// A response's status, if it is a final one (200 to 999): a 1xx sent as
/// the response would leave the client waiting for the real one. The rule
/// of every app-facing response call (ASGI on both workers, RSGI).
pub(crate) fn final_status(status: i64) -> Option<u16> {
    u16::try_from(status)
        .ok()
        .filter(|c| (200..=999).contains(c))
}

/// The error for a status `final_status` refused.
pub(crate) fn final_status_error(status: impl std::fmt::Display) -> String {
    format!(
        "invalid status {status}: a response's status is 200 to 999 \
         (a 1xx is an interim response, never the answer)"
    )
}

#[pyfunction]
#[pyo3(signature = (status, headers, http_version, keep_alive, is_head, body_length = -1))]
pub fn asgi_response_head<'py>(
    py: Python<'py>,
    status: i64,
    headers: &Bound<'py, PyAny>,
    http_version: &str,
    keep_alive: bool,
    is_head: bool,
    body_length: i64,
) -> PyResult<(Bound<'py, PyBytes>, i64, bool, bool)> {
    let head = asgi_head(
        status,
        headers,
        http_version != "1.0",
        keep_alive,
        is_head,
        body_length,
    )?;
    let (content_length, chunked) = head.framing.as_python();
    Ok((
        PyBytes::new(py, &head.bytes),
        content_length,
        chunked,
        head.keep_alive,
    ))
}

/// The head of an ASGI `http.response.start` (an int status and an iterable
/// of `[name, value]` byte strings, tuples or lists as the spec allows),
/// checked and framed: `body_length` is the whole body's size when known
/// (a Content-Length then), -1 when it streams.
pub(crate) fn asgi_head(
    status: i64,
    headers: &Bound<'_, PyAny>,
    http11: bool,
    keep_alive: bool,
    is_head: bool,
    body_length: i64,
) -> PyResult<http1_codec::ResponseHead> {
    let code =
        final_status(status).ok_or_else(|| PyValueError::new_err(final_status_error(status)))?;
    let line = format!("{code} {}", http1_codec::reason_phrase(code));
    let mut b = ResponseHeadBuilder::new(line.trim_end().as_bytes(), http11, keep_alive, is_head)
        .map_err(PyValueError::new_err)?;
    for item in headers.try_iter()? {
        let item = item?;
        if item.len().ok() != Some(2) {
            return Err(PyValueError::new_err(
                "headers must be [name, value] pairs of byte strings",
            ));
        }
        let (name, value) = (item.get_item(0)?, item.get_item(1)?);
        let (Ok(name), Ok(value)) = (name.cast::<PyBytes>(), value.cast::<PyBytes>()) else {
            return Err(PyTypeError::new_err(
                "header names and values must be byte strings",
            ));
        };
        add_header(&mut b, name.as_bytes(), value.as_bytes())?;
    }
    Ok(b.finish_with_length(u64::try_from(body_length).ok()))
}

pub(crate) fn add_header(b: &mut ResponseHeadBuilder, name: &[u8], value: &[u8]) -> PyResult<()> {
    b.header(name, value)
        .map_err(|e| PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(name))))
}

/// Sets the Server header every response gets; `None` sends none.
#[pyfunction]
#[pyo3(signature = (value))]
pub fn set_server_header(value: Option<&Bound<'_, PyString>>) -> PyResult<()> {
    let bytes = value
        .map(|v| latin1_bytes(v, "Server header"))
        .transpose()?;
    http1_codec::set_server_header(bytes.as_deref()).map_err(PyValueError::new_err)
}

/// Whether responses get a Date header when the app set none.
#[pyfunction]
pub fn set_date_header(on: bool) {
    http1_codec::set_date_header(on);
}
