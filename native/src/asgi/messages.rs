//! The messages of the ASGI HTTP exchange: the ones the engine gives the app,
//! and the app's `send` messages read into Rust values, checked as the asgi
//! worker checks them (the errors are raised in the app, where it sees them).

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::HeaderMap;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::http1_codec::{check_field, check_visible_field, AppField};
use crate::py::message_keys::{Key, MessageKeys};
use crate::py::text::with_bytes;
use crate::server::app_fields::AppFields;

pub fn request_message<'py>(
    py: Python<'py>,
    body: &[u8],
    more: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let message = PyDict::new(py);
    message.set_item(intern!(py, "type"), intern!(py, "http.request"))?;
    message.set_item(intern!(py, "body"), PyBytes::new(py, body))?;
    message.set_item(intern!(py, "more_body"), more)?;
    Ok(message)
}

pub fn disconnect_message(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let message = PyDict::new(py);
    message.set_item(intern!(py, "type"), intern!(py, "http.disconnect"))?;
    Ok(message)
}

/// One `send` message, read.
pub enum Sent {
    Start {
        status: u16,
        headers: AppFields,
        /// `trailers`: the body is followed by `http.response.trailers`.
        trailers: bool,
    },
    Body {
        body: Bytes,
        more: bool,
    },
    PathSend {
        path: std::path::PathBuf,
    },
    Trailers {
        fields: HeaderMap,
        more: bool,
    },
    /// `http.response.early_hint`: the 103 response's head, whole.
    EarlyHint(Bytes),
    /// Anything else: the caller says what it expected instead.
    Other,
}

pub fn read(message: &Bound<'_, PyAny>) -> PyResult<(String, Sent)> {
    let keys = MessageKeys::of(message);
    let kind = keys.required(Key::Type)?;
    let kind = kind
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err("ASGI message 'type' must be a str"))?
        .to_str()?
        .to_owned();
    let sent = match kind.as_str() {
        "http.response.start" => start(&keys)?,
        "http.response.body" => Sent::Body {
            body: body(&keys)?,
            more: keys.flag(Key::MoreBody)?,
        },
        "http.response.pathsend" => Sent::PathSend {
            path: keys.required(Key::Path)?.extract()?,
        },
        "http.response.trailers" => Sent::Trailers {
            fields: trailer_fields(&keys)?,
            more: keys.flag(Key::MoreTrailers)?,
        },
        "http.response.early_hint" => Sent::EarlyHint(early_hint(&keys)?),
        _ => Sent::Other,
    };
    Ok((kind, sent))
}

fn start(keys: &MessageKeys<'_>) -> PyResult<Sent> {
    let status = keys.required(Key::Status)?;
    if !status.is_exact_instance_of::<pyo3::types::PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "http.response.start 'status' must be an int, not {}",
            status.repr()?
        )));
    }
    let status = status
        .extract::<i64>()
        .ok()
        .and_then(crate::py::response::final_status)
        .ok_or_else(|| PyValueError::new_err(crate::py::response::final_status_error(status)))?;
    let mut headers = AppFields::new(b"", 4);
    for_each_pair(keys, |name, value| {
        headers
            .push_visible(name, value, true)
            .map_err(|e| invalid_field(name, e))?;
        Ok(())
    })?;
    Ok(Sent::Start {
        status,
        headers,
        trailers: keys.flag(Key::Trailers)?,
    })
}

/// Each of the message's `headers`, a (name, value) pair of byte strings.
fn for_each_pair(
    keys: &MessageKeys<'_>,
    mut f: impl FnMut(&[u8], &[u8]) -> PyResult<()>,
) -> PyResult<()> {
    let Some(headers) = keys.get(Key::Headers)? else {
        return Ok(());
    };
    // The usual list is read by index: no iterator object made and freed.
    if let Ok(list) = headers.cast::<PyList>() {
        for item in list.iter() {
            with_pair(&item, &mut f)?;
        }
        return Ok(());
    }
    for item in headers.try_iter()? {
        with_pair(&item?, &mut f)?;
    }
    Ok(())
}

fn invalid_field(name: &[u8], e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!(
        "invalid header field {:?}: {e}",
        String::from_utf8_lossy(name)
    ))
}

/// Trailer fields, less those that only mean something in a head (framing
/// and connection fields, RFC 9110 6.5.1).
fn trailer_fields(keys: &MessageKeys<'_>) -> PyResult<HeaderMap> {
    let mut map = HeaderMap::new();
    for_each_pair(keys, |name, value| {
        // What hyper's map would not hold (a control byte) raises in the app,
        // so that every protocol takes the same trailers.
        let kind = check_visible_field(name, value).map_err(|e| invalid_field(name, e))?;
        if !matches!(kind, AppField::Other | AppField::Date | AppField::Server) {
            return Ok(());
        }
        let header = HeaderName::from_bytes(name).map_err(|e| invalid_field(name, e))?;
        let value = HeaderValue::from_bytes(value).map_err(|e| invalid_field(name, e))?;
        map.append(header, value);
        Ok(())
    })?;
    Ok(map)
}

/// The 103 response for the message's `links`, one `Link` field each.
fn early_hint(keys: &MessageKeys<'_>) -> PyResult<Bytes> {
    let mut head = b"HTTP/1.1 103 Early Hints\r\n".to_vec();
    if let Some(links) = keys.get(Key::Links)? {
        for link in links.try_iter()? {
            let link = link?;
            let link = link
                .cast::<PyBytes>()
                .map_err(|_| PyTypeError::new_err("early hint links must be byte strings"))?
                .as_bytes();
            check_field(b"link", link).map_err(|e| invalid_field(b"link", e))?;
            head.extend_from_slice(b"Link: ");
            head.extend_from_slice(link);
            head.extend_from_slice(b"\r\n");
        }
    }
    head.extend_from_slice(b"\r\n");
    Ok(Bytes::from(head))
}

/// One header: a two-item sequence of byte strings, read in place.
fn with_pair<'py, R>(
    item: &Bound<'py, PyAny>,
    f: impl FnOnce(&[u8], &[u8]) -> PyResult<R>,
) -> PyResult<R> {
    let bytes = |o: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyBytes>> {
        o.cast::<PyBytes>()
            .cloned()
            .map_err(|_| PyTypeError::new_err("header names and values must be byte strings"))
    };
    let (name, value) = if let Ok(t) = item.cast::<PyTuple>() {
        if t.len() != 2 {
            return Err(not_a_pair());
        }
        (bytes(&t.get_item(0)?)?, bytes(&t.get_item(1)?)?)
    } else {
        let items: Vec<Bound<'_, PyAny>> = item.try_iter()?.collect::<PyResult<_>>()?;
        let [name, value] = &items[..] else {
            return Err(not_a_pair());
        };
        (bytes(name)?, bytes(value)?)
    };
    f(name.as_bytes(), value.as_bytes())
}

fn not_a_pair() -> PyErr {
    PyValueError::new_err("a header must be a (name, value) pair")
}

fn body(keys: &MessageKeys<'_>) -> PyResult<Bytes> {
    let Some(body) = keys.get(Key::Body)? else {
        return Ok(Bytes::new());
    };
    if let Ok(b) = body.cast::<PyBytes>() {
        return Ok(crate::py::body_bytes::body_bytes(b));
    }
    if body.is_instance_of::<PyByteArray>() || body.is_instance_of::<pyo3::types::PyMemoryView>() {
        return with_bytes(&body, Bytes::copy_from_slice);
    }
    Err(PyTypeError::new_err(format!(
        "http.response.body 'body' must be bytes, not {}",
        body.get_type().name()?
    )))
}

/// The RuntimeError an app gets for a message out of order.
pub fn unexpected(expected: &str, got: &str) -> PyErr {
    PyRuntimeError::new_err(format!("Expected ASGI message '{expected}', got '{got}'"))
}
