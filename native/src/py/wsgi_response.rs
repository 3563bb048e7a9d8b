//! `WsgiResponse`: the per-request half of a Python worker's WSGI response
//! (sync, gthread, gevent): `start_response`, `write`, the one-block body,
//! the end of the body. The connection stays a Python object: the response
//! calls its `sendall` and `send_last`, whose waiting, pacing and holding
//! belong to the worker. The rare paths (a file sent with
//! sendfile, an error answered by the server) are the Python subclass's
//! (`supervise/http/wsgi_response.py`), which reads the fields exposed here.
//!
//! Why native: these steps were about 200 bytecodes and five Python calls of
//! every gthread request, a fifth of its interpreted work.

use pyo3::exceptions::{PyAssertionError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

use super::request::Request;
use super::response::{add_header, for_each_wsgi_field, start_response_rules};
use super::text::latin1_bytes;
use crate::http1_codec::{ResponseHeadBuilder, Version};

/// Bodies up to this size go out joined to their head (one small copy, one
/// send); larger ones after it, so a slow reader never holds a copy of them.
const JOIN_UP_TO: usize = 64 * 1024;
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// One response: the state `start_response()` and `write()` share. Also the
/// `resp` the post_request hook and the access log get: `status`,
/// `status_code`, `headers` and `sent` (body bytes).
#[pyclass(subclass, module = "supervise._native")]
pub struct WsgiResponse {
    #[pyo3(get, name = "_conn")]
    conn: Py<PyAny>,
    /// The worker's ServeState: once it is stopping, a response whose head is
    /// not sent yet closes its connection instead of inviting another request.
    state: Py<PyAny>,
    /// The request was HTTP/1.1 (chunked framing allowed), not 1.0.
    http11: bool,
    #[pyo3(get, name = "_is_head")]
    is_head: bool,
    #[pyo3(get, set)]
    keep_alive: bool,
    #[pyo3(get, set)]
    status: Option<Py<PyAny>>,
    #[pyo3(get, set)]
    status_code: i64,
    #[pyo3(get, set)]
    headers: Py<PyAny>,
    #[pyo3(get, set)]
    head_sent: bool,
    #[pyo3(get, set)]
    sent: i64,
    /// Content-Length of the response, -1 when none.
    #[pyo3(get, name = "_length")]
    length: i64,
    #[pyo3(get, name = "_chunked")]
    chunked: bool,
    /// Whether this response may carry a body at all.
    #[pyo3(get, name = "_body")]
    body: bool,
}

/// What a body block becomes on the wire, decided under a short borrow so
/// that no borrow is held while the connection's Python code runs.
enum Out {
    One(Vec<u8>),
    Given(Py<PyAny>),
    HeadThenGiven(Vec<u8>, Py<PyAny>),
}

#[pymethods]
impl WsgiResponse {
    /// The response to `req` on `conn`; `keep_alive`: whether the worker
    /// lets the connection carry another request (the request must ask too).
    #[new]
    #[pyo3(signature = (conn, state, req, keep_alive))]
    fn new(
        py: Python<'_>,
        conn: Py<PyAny>,
        state: Py<PyAny>,
        req: PyRef<'_, Request>,
        keep_alive: bool,
    ) -> Self {
        let head = req.head();
        WsgiResponse {
            conn,
            state,
            http11: head.version == Version::Http11,
            is_head: head.method() == b"HEAD",
            keep_alive: keep_alive && head.keep_alive,
            status: None,
            status_code: 0,
            headers: pyo3::types::PyList::empty(py).into_any().unbind(),
            head_sent: false,
            sent: 0,
            length: -1,
            chunked: false,
            body: true,
        }
    }

    #[pyo3(signature = (status, headers, exc_info = None))]
    fn start_response<'py>(
        slf: &Bound<'py, Self>,
        status: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        exc_info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let (started, head_sent) = {
            let me = slf.borrow();
            (me.status.is_some(), me.head_sent)
        };
        let status = start_response_rules(status, exc_info, started, head_sent)?;
        {
            let mut me = slf.borrow_mut();
            me.status = Some(status.into_any().unbind());
            me.headers = headers.clone().unbind();
        }
        slf.getattr(intern!(py, "write"))
    }

    /// The head, formatted; `known_length` >= 0 when the whole body size is
    /// known (it becomes the Content-Length when the app gave none).
    fn _head<'py>(slf: &Bound<'py, Self>, known_length: i64) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(slf.py(), &head(slf, known_length)?))
    }

    /// The write() callable of PEP 3333, also used for each block of the body.
    fn write(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        if !slf.borrow().head_sent {
            if data.is_truthy()? {
                // The head waits for the first non-empty block.
                send_first(slf, data, First::Block)?;
            }
        } else if data.is_truthy()? && slf.borrow().body {
            send_more(slf, data)?;
        }
        Ok(())
    }

    /// The whole body in one block (a one-item list): one send, its length
    /// known, the connection's `send_last` (a worker may hold it briefly).
    fn send_whole(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        if slf.borrow().head_sent {
            if data.is_truthy()? && slf.borrow().body {
                send_more(slf, data)?;
            }
            return Self::finish(slf);
        }
        send_first(slf, data, First::Whole)
    }

    /// End the body: send the head if still due, or the last chunk.
    fn finish(slf: &Bound<'_, Self>) -> PyResult<()> {
        let (head_sent, chunked) = {
            let me = slf.borrow();
            (me.head_sent, me.chunked)
        };
        if !head_sent {
            send_first(slf, &PyBytes::new(slf.py(), b""), First::End)?;
        } else if chunked {
            send(
                slf,
                Out::One(LAST_CHUNK.to_vec()),
                intern!(slf.py(), "sendall"),
            )?;
        }
        let mut me = slf.borrow_mut();
        if me.body && me.sent < me.length {
            // Shorter than announced: the client would wait for the rest.
            me.keep_alive = false;
        }
        Ok(())
    }
}

/// bytes as they are; bytearray and memoryview copied; anything else is the
/// application's error.
fn as_bytes<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(b) = data.cast_exact::<PyBytes>() {
        return Ok(b.clone());
    }
    if data.is_instance_of::<PyByteArray>() || data.is_instance_of::<PyMemoryView>() {
        return Ok(data
            .py()
            .get_type::<PyBytes>()
            .call1((data,))?
            .cast_into()?);
    }
    let ty = data.get_type().name()?;
    let shown: String = data.repr()?.to_string().chars().take(60).collect();
    Err(PyTypeError::new_err(format!(
        "a WSGI application must send bytes, not {ty} ({shown})"
    )))
}

/// The head, and the framing it decided recorded on the response.
fn head(slf: &Bound<'_, WsgiResponse>, known_length: i64) -> PyResult<Vec<u8>> {
    let py = slf.py();
    let (status, headers, state, http11, is_head) = {
        let me = slf.borrow();
        let Some(status) = me.status.as_ref() else {
            return Err(PyAssertionError::new_err(
                "the application did not call start_response()",
            ));
        };
        (
            status.clone_ref(py),
            me.headers.clone_ref(py),
            me.state.clone_ref(py),
            me.http11,
            me.is_head,
        )
    };
    if state
        .bind(py)
        .getattr(intern!(py, "stopping"))?
        .is_truthy()?
    {
        slf.borrow_mut().keep_alive = false;
    }
    let status = status.bind(py);
    let status = status
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err("status must be a str"))?;
    let status = latin1_bytes(status, "status")?;
    let keep_alive = slf.borrow().keep_alive;
    let invalid =
        |e: &str| PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(&status)));
    let mut b = ResponseHeadBuilder::new(&status, http11, keep_alive, is_head).map_err(invalid)?;
    let code = b.code();
    for_each_wsgi_field(headers.bind(py), |name, value| {
        add_header(&mut b, name, value)
    })?;
    let head = b.finish_with_length(u64::try_from(known_length).ok());
    let (length, chunked) = head.framing.as_python();
    let mut me = slf.borrow_mut();
    me.status_code = i64::from(code);
    me.length = length;
    me.chunked = chunked;
    me.keep_alive = head.keep_alive;
    me.body = !is_head && code >= 200 && code != 204 && code != 304;
    Ok(head.bytes)
}

/// What the first body block is: a block of a longer body (`write`), the
/// whole body (`send_whole`), or the end of an empty one (`finish`).
#[derive(Clone, Copy, PartialEq)]
enum First {
    Block,
    Whole,
    End,
}

/// Sends the head with the first block: joined to it up to `JOIN_UP_TO`,
/// never past the app's Content-Length. A whole body's length becomes the
/// Content-Length when the app gave none, and it goes by `send_last`.
fn send_first(
    slf: &Bound<'_, WsgiResponse>,
    data: &Bound<'_, PyAny>,
    first: First,
) -> PyResult<()> {
    let data = as_bytes(data)?;
    let bytes = data.as_bytes();
    let known_length = match first {
        First::Block => -1,
        First::Whole => bytes.len() as i64,
        First::End => 0,
    };
    let head = head(slf, known_length)?;
    let out = {
        let mut me = slf.borrow_mut();
        me.head_sent = true;
        let out = if bytes.is_empty() || !me.body {
            Out::One(head)
        } else {
            let mut n = bytes.len();
            let out = if me.chunked {
                // Not expected for a whole body (its length is known), but
                // keep the framing right.
                let mut buf = head;
                chunk_into(&mut buf, bytes);
                if first == First::Whole {
                    buf.extend_from_slice(LAST_CHUNK);
                }
                Out::One(buf)
            } else {
                if me.length >= 0 && (me.length as usize) < n {
                    n = me.length as usize;
                }
                if n <= JOIN_UP_TO {
                    let mut buf = head;
                    buf.extend_from_slice(&bytes[..n]);
                    Out::One(buf)
                } else if n < bytes.len() {
                    Out::HeadThenGiven(
                        head,
                        PyBytes::new(slf.py(), &bytes[..n]).into_any().unbind(),
                    )
                } else {
                    // Not copied behind its head: a slow reader would hold
                    // the app's body and the copy.
                    Out::HeadThenGiven(head, data.clone().into_any().unbind())
                }
            };
            me.sent = n as i64;
            out
        };
        if first == First::Whole && me.body && me.sent < me.length {
            me.keep_alive = false; // announced more body than it sent
        }
        out
    };
    let last = if first == First::Whole {
        intern!(slf.py(), "send_last")
    } else {
        intern!(slf.py(), "sendall")
    };
    send(slf, out, last)
}

fn send_more(slf: &Bound<'_, WsgiResponse>, data: &Bound<'_, PyAny>) -> PyResult<()> {
    let data = as_bytes(data)?;
    let bytes = data.as_bytes();
    let out = {
        let mut me = slf.borrow_mut();
        let mut n = bytes.len();
        let out = if me.chunked {
            let mut buf = Vec::with_capacity(n + 12);
            chunk_into(&mut buf, bytes);
            Out::One(buf)
        } else {
            if me.length >= 0 {
                let room = me.length - me.sent;
                if n as i64 > room {
                    // More than the app's Content-Length: never send it.
                    if room <= 0 {
                        return Ok(());
                    }
                    n = room as usize;
                }
            }
            if n < bytes.len() {
                Out::Given(PyBytes::new(slf.py(), &bytes[..n]).into_any().unbind())
            } else {
                Out::Given(data.clone().into_any().unbind())
            }
        };
        me.sent += n as i64;
        out
    };
    send(slf, out, intern!(slf.py(), "sendall"))
}

/// One chunk of the chunked coding: size line, data, CRLF.
fn chunk_into(buf: &mut Vec<u8>, data: &[u8]) {
    buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
}

/// Hands `out` to the connection; `last` names the method for its final
/// piece (`send_last` for a whole response, else `sendall`).
fn send(slf: &Bound<'_, WsgiResponse>, out: Out, last: &Bound<'_, PyString>) -> PyResult<()> {
    let py = slf.py();
    let conn = slf.borrow().conn.clone_ref(py);
    let conn = conn.bind(py);
    match out {
        Out::One(buf) => conn.call_method1(last, (PyBytes::new(py, &buf),)).map(drop),
        Out::Given(data) => conn.call_method1(last, (data,)).map(drop),
        Out::HeadThenGiven(head, data) => {
            conn.call_method1(intern!(py, "sendall"), (PyBytes::new(py, &head),))?;
            conn.call_method1(last, (data,)).map(drop)
        }
    }
}
