//! `AsgiCycle`: the state of one request of the asgi worker, and what of it
//! runs on every request: taking body bytes from the connection
//! (`feed_body`), `receive` when the body is there (that half of it in
//! `cycle_body.rs`), and `send` for the two messages of nearly every
//! response (`http.response.start`, then the body). Everything that waits
//! or is rare is the Python subclass's (`supervise/http/asgi_cycle.py`:
//! `receive` that must wait, the other messages, what an app left
//! unanswered, the log lines), which reads and sets the fields
//! exposed here. It writes to the connection's transport, pauses and
//! resumes its reading, and tells it when the response is complete
//! (`connection.rs`).
//!
//! The response is a state machine (`ResponseState`): the head waits for the
//! first body message, so a body that comes in one message goes out in one
//! write with a Content-Length, and a streamed one is chunked.
//!
//! Why native: the cycle's constructor, `send` and the head and body steps
//! behind it were about 460 bytecodes, six Python frames and two coroutine
//! objects of every small request; a request body's steps as Python over
//! these fields cost more than the bytecodes they saved.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyInt, PyList, PyMemoryView, PyString, PyTuple};
use pyo3::{ffi, intern};

use super::connection::AsgiHttpConnection;
use super::turn_writes::TurnWrites;
use crate::http1_codec::Version;
use crate::py::awaitable::done;
use crate::py::chunked::ChunkedDecoder;
use crate::py::message_keys::{Key, MessageKeys};
use crate::py::request::Request;
use crate::py::request_counts::RequestCounts;
use crate::py::response::asgi_head;

#[path = "cycle_body.rs"]
mod body;

/// Bodies up to this size go out joined to their head (one small copy, one
/// write); larger ones beside it, so a slow reader holds no second copy.
const JOIN_UP_TO: usize = 64 * 1024;
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Where a response is. Python compares with `==` (each read of
/// `cycle.response` is a new object).
#[pyclass(
    eq,
    frozen,
    module = "supervise._native",
    name = "AsgiResponseState",
    rename_all = "SCREAMING_SNAKE_CASE"
)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ResponseState {
    /// No `http.response.start` yet.
    NotStarted,
    /// Started; the head waits for the first body message.
    Started,
    /// The head is sent; more body may follow.
    Streaming,
    /// The body is complete; announced trailers are still to come.
    Trailers,
    /// Fully written (or given up).
    Complete,
}

#[pyclass(subclass, module = "supervise._native")]
pub struct AsgiCycle {
    #[pyo3(get)]
    proto: Py<AsgiHttpConnection>,
    #[pyo3(get)]
    req: Py<Request>,
    #[pyo3(get)]
    scope: Py<PyAny>,
    /// The connection's transport, read once.
    transport: Py<PyAny>,
    /// The worker's ServeState: once it is stopping, a head not yet sent
    /// says `Connection: close`.
    serve_state: Py<PyAny>,
    http11: bool,
    #[pyo3(get, set)]
    keep_alive: bool,
    #[pyo3(get)]
    is_head: bool,
    /// The client disconnected.
    #[pyo3(get, set)]
    gone: bool,
    #[pyo3(get, set)]
    response: ResponseState,
    /// The future `receive` waits on, woken by body bytes, the client's
    /// going and the response's end.
    #[pyo3(get, set, name = "_waiter")]
    waiter: Option<Py<PyAny>>,
    /// Request body that arrived and the app has not taken yet.
    #[pyo3(get)]
    body: Py<PyList>,
    #[pyo3(get, set)]
    body_size: u64,
    /// The app got the last `http.request` message.
    #[pyo3(get, set)]
    body_delivered: bool,
    #[pyo3(get, set)]
    body_pending: bool,
    #[pyo3(get, set)]
    continue_sent: bool,
    #[pyo3(get, name = "_decoder")]
    decoder: Option<Py<ChunkedDecoder>>,
    /// Content-Length bytes still to come.
    #[pyo3(get, set, name = "_remaining")]
    remaining: u64,
    /// When body bytes last came (the sweep's body_timeout); 0 with no body.
    #[pyo3(get, set)]
    last_read: f64,
    #[pyo3(get, name = "_status")]
    status: i64,
    /// The app's header list, kept for the access log.
    #[pyo3(get, name = "_headers")]
    headers: Py<PyAny>,
    /// The trailer section's field lines so far (bytes), written at the last message.
    #[pyo3(get, set, name = "_trailer_fields")]
    trailer_fields: Option<Py<PyAny>>,
    /// The app announced trailers.
    #[pyo3(get, set)]
    trailers: bool,
    #[pyo3(get, name = "_chunked")]
    chunked: bool,
    /// The Content-Length being sent, -1 when none.
    #[pyo3(get, name = "_length")]
    length: i64,
    /// Body bytes sent.
    #[pyo3(get, set, name = "_sent")]
    sent: i64,
    /// The worker's counts, which this request's start and end change.
    counts: Py<RequestCounts>,
}

impl AsgiCycle {
    pub(crate) fn response_state(&self) -> ResponseState {
        self.response
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone
    }

    pub(crate) fn scope(&self) -> &Py<PyAny> {
        &self.scope
    }

    pub(crate) fn counts(&self) -> &Py<RequestCounts> {
        &self.counts
    }

    pub(super) fn body_pending(&self) -> bool {
        self.body_pending
    }

    pub(super) fn set_keep_alive(&mut self, keep_alive: bool) {
        self.keep_alive = keep_alive;
    }
}

/// `time.monotonic()`, the clock the worker's sweep reads.
pub(crate) fn monotonic(py: Python<'_>) -> PyResult<f64> {
    static MONOTONIC: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    MONOTONIC
        .import(py, "time", "monotonic")?
        .call0()?
        .extract()
}

fn write(transport: &Bound<'_, PyAny>, data: Bound<'_, PyBytes>) -> PyResult<()> {
    transport.call_method1(intern!(transport.py(), "write"), (data,))?;
    Ok(())
}

/// `parts` as one new bytes object, written once: `PyBytes::new_with`
/// zero-fills its buffer first, which cost as much as the copy.
pub(super) fn joined<'py>(py: Python<'py>, parts: &[&[u8]]) -> PyResult<Bound<'py, PyBytes>> {
    let size: usize = parts.iter().map(|p| p.len()).sum();
    // SAFETY: a NULL source asks CPython for an uninitialised bytes object of
    // `size` bytes (a new reference, or NULL with an exception set); every
    // byte is written below before the object is handed to anyone.
    unsafe {
        let bytes = ffi::PyBytes_FromStringAndSize(std::ptr::null(), size as ffi::Py_ssize_t);
        let bytes = Bound::from_owned_ptr_or_err(py, bytes)?;
        let mut at = ffi::PyBytes_AsString(bytes.as_ptr()).cast::<u8>();
        for part in parts {
            std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
            at = at.add(part.len());
        }
        Ok(bytes.cast_into_unchecked())
    }
}

/// A body message's `body`: bytes as given, a bytearray or memoryview copied.
fn body_of<'py>(py: Python<'py>, keys: &MessageKeys<'py>) -> PyResult<Bound<'py, PyBytes>> {
    let Some(body) = keys.get(Key::Body)? else {
        return Ok(PyBytes::new(py, b""));
    };
    if let Ok(bytes) = body.cast::<PyBytes>() {
        return Ok(bytes.clone());
    }
    if body.is_instance_of::<PyByteArray>() || body.is_instance_of::<PyMemoryView>() {
        return Ok(py.get_type::<PyBytes>().call1((body,))?.cast_into()?);
    }
    Err(PyTypeError::new_err(format!(
        "http.response.body 'body' must be bytes, not {}",
        body.get_type().str()?
    )))
}

fn too_long() -> PyErr {
    PyRuntimeError::new_err("Response content longer than its Content-Length")
}

#[pymethods]
impl AsgiCycle {
    #[new]
    fn new(
        py: Python<'_>,
        proto: Bound<'_, AsgiHttpConnection>,
        req: Bound<'_, Request>,
        scope: Py<PyAny>,
    ) -> PyResult<Self> {
        let (transport, shared) = {
            let conn = proto.borrow();
            (conn.transport().clone_ref(py), conn.shared().clone_ref(py))
        };
        let shared = shared.get();
        let head = req.get().head();
        let (decoder, body_pending, remaining) = if head.chunked {
            let decoder = ChunkedDecoder::new(shared.limit_body());
            (Some(Py::new(py, decoder)?), true, 0)
        } else {
            let remaining = head.content_length.unwrap_or(0);
            (None, remaining > 0, remaining)
        };
        Ok(AsgiCycle {
            transport,
            serve_state: shared.serve_state().clone_ref(py),
            proto: proto.unbind(),
            http11: head.version == Version::Http11,
            keep_alive: head.keep_alive && shared.keepalive() > 0.0,
            is_head: head.method() == b"HEAD",
            continue_sent: !head.expect_continue,
            req: req.unbind(),
            scope,
            gone: false,
            response: ResponseState::NotStarted,
            waiter: None,
            body: PyList::empty(py).unbind(),
            body_size: 0,
            body_delivered: false,
            body_pending,
            decoder,
            remaining,
            last_read: if body_pending { monotonic(py)? } else { 0.0 },
            status: 0,
            headers: PyTuple::empty(py).into_any().unbind(),
            trailer_fields: None,
            trailers: false,
            chunked: false,
            length: -1,
            sent: 0,
            counts: shared.counts().clone_ref(py),
        })
    }

    /// Takes body bytes from the connection; returns what follows the body
    /// (the next request's bytes). Reading pauses past `BODY_HIGH_WATER`
    /// bytes the app has not taken (`asgi_cycle_body.rs`).
    fn feed_body<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyBytes>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        Self::feed_body_impl(slf, data)
    }

    /// The app's `receive`: an awaitable already done when the body is
    /// there, else the subclass's `_receive_slow` coroutine.
    fn receive<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::receive_impl(slf)
    }

    /// The body the app has not taken, as its next `http.request` message.
    #[pyo3(name = "_take_body")]
    fn take_body<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        Self::take_body_impl(slf)
    }

    /// Wakes what waits in `receive`.
    #[pyo3(name = "_wake")]
    fn wake(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::wake_impl(slf)
    }

    /// The app's `send`. The response's start and body messages are taken
    /// here and need no waiting unless the transport is paused (then the
    /// awaitable is the connection's `drain()`); any other message, one
    /// that is not a dict, and any message after the client left go to the
    /// subclass's `_send_slow` coroutine.
    fn send<'py>(
        slf: &Bound<'py, Self>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let slow = || slf.call_method1(intern!(py, "_send_slow"), (message,));
        let Ok(dict) = message.cast::<PyDict>() else {
            return slow();
        };
        let keys = MessageKeys::of_dict(dict);
        let Some(kind) = keys.get(Key::Type)? else {
            return slow();
        };
        let Ok(kind) = kind.cast::<PyString>() else {
            return slow();
        };
        let (gone, state) = {
            let me = slf.borrow();
            (me.gone, me.response)
        };
        if gone {
            return slow();
        }
        match (kind.to_str(), state) {
            (Ok("http.response.body"), ResponseState::Started | ResponseState::Streaming) => {
                Self::body_message(slf, &keys)?
            }
            (Ok("http.response.start"), ResponseState::NotStarted) => {
                Self::start_message(slf, &keys)?
            }
            _ => return slow(),
        }
        let proto = slf.borrow().proto.clone_ref(py).into_bound(py);
        if proto.borrow().is_write_paused() && !slf.borrow().gone {
            return proto.call_method0(intern!(py, "drain"));
        }
        Ok(done(py).into_bound(py))
    }

    /// The head for the status and fields `http.response.start` gave:
    /// `body_length` is the whole body's size when known, -1 when it
    /// streams. Sets the framing it chose.
    #[pyo3(name = "_head")]
    fn head_bytes<'py>(slf: &Bound<'py, Self>, body_length: i64) -> PyResult<Bound<'py, PyBytes>> {
        let head = Self::make_head(slf, body_length)?;
        Ok(PyBytes::new(slf.py(), &head))
    }

    /// The body is complete: trailers next if announced, else the last
    /// chunk (chunked framing) and the end.
    #[pyo3(name = "_body_done")]
    fn body_done(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (trailers, chunked, transport) = {
            let me = slf.borrow();
            (me.trailers, me.chunked, me.transport.clone_ref(py))
        };
        if trailers {
            // They come whatever the framing; only a chunked body can carry them.
            slf.borrow_mut().response = ResponseState::Trailers;
            return Ok(());
        }
        if chunked {
            write(transport.bind(py), PyBytes::new(py, LAST_CHUNK))?;
        }
        Self::finish(slf)
    }

    /// The response is fully written: wake `receive`, and tell the
    /// connection whether it may carry another request.
    #[pyo3(name = "_finish")]
    fn finish(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (keep_alive, short, proto) = {
            let mut me = slf.borrow_mut();
            me.response = ResponseState::Complete;
            // Fewer bytes than announced: the client would wait for the rest.
            let short = 0 < me.length && me.length != me.sent && !me.is_head;
            (me.keep_alive && !short, short, me.proto.clone_ref(py))
        };
        if short {
            slf.call_method0(intern!(py, "_log_short_body"))?;
        }
        Self::wake_impl(slf)?;
        AsgiHttpConnection::response_complete(proto.bind(py), slf, keep_alive)
    }
}

impl AsgiCycle {
    /// A whole response, complete here, written at the end of the loop's
    /// turn with the connection's next step (`turn_writes.rs`); false when
    /// it should go out now (no other connection to gather with).
    fn finish_after_turn(slf: &Bound<'_, Self>, data: &Bound<'_, PyBytes>) -> PyResult<bool> {
        let py = slf.py();
        let (proto, transport) = {
            let me = slf.borrow();
            if me.sent != me.length {
                return Ok(false); // short of its Content-Length: finish() says so
            }
            (me.proto.clone_ref(py), me.transport.clone_ref(py))
        };
        let turn = {
            let conn = proto.borrow(py);
            let shared = conn.shared().get();
            let turn = shared.turn_writes().bind(py).clone();
            if !TurnWrites::worth_waiting(&turn, shared.open_connections(py)) {
                return Ok(false);
            }
            turn
        };
        let keep_alive = {
            let mut me = slf.borrow_mut();
            me.response = ResponseState::Complete;
            me.keep_alive
        };
        Self::wake_impl(slf)?;
        TurnWrites::push(&turn, slf, proto, transport, data.clone(), keep_alive)?;
        Ok(true)
    }

    fn start_message(slf: &Bound<'_, Self>, keys: &MessageKeys<'_>) -> PyResult<()> {
        let py = slf.py();
        let status = keys.required(Key::Status)?;
        if !status.is_exact_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "http.response.start 'status' must be an int, not {}",
                status.repr()?
            )));
        }
        let status: i64 = status.extract()?;
        // Kept for the access log: an iterator would be used up by the head.
        let headers = match keys.get(Key::Headers)? {
            None => PyTuple::empty(py).into_any(),
            Some(h)
                if h.is_exact_instance_of::<PyList>() || h.is_exact_instance_of::<PyTuple>() =>
            {
                h
            }
            Some(h) => py.get_type::<PyList>().call1((h,))?,
        };
        let trailers = keys
            .get(Key::Trailers)?
            .map(|t| t.is_truthy())
            .transpose()?;
        let mut me = slf.borrow_mut();
        me.status = status;
        me.headers = headers.unbind();
        if let Some(trailers) = trailers {
            me.trailers = trailers;
        }
        me.response = ResponseState::Started;
        Ok(())
    }

    fn body_message(slf: &Bound<'_, Self>, keys: &MessageKeys<'_>) -> PyResult<()> {
        let py = slf.py();
        let body = body_of(py, keys)?;
        let more = keys.flag(Key::MoreBody)?;
        let (state, trailers, transport) = {
            let me = slf.borrow();
            (me.response, me.trailers, me.transport.clone_ref(py))
        };
        let transport = transport.bind(py);
        let size = body.as_bytes().len();
        let mut rest = Some(&body);
        if state == ResponseState::Started {
            // Announced trailers need chunked framing, even for a body in one message.
            let whole = if more || trailers { -1 } else { size as i64 };
            let head = Self::make_head(slf, whole)?;
            let length = {
                let mut me = slf.borrow_mut();
                me.response = ResponseState::Streaming;
                me.length
            };
            if size > 0 && length > 0 {
                // The usual response: head and whole body in one write.
                if size as i64 > length {
                    return Err(too_long());
                }
                slf.borrow_mut().sent = size as i64;
                if size <= JOIN_UP_TO {
                    let data = joined(py, &[&head, body.as_bytes()])?;
                    if !more && !trailers && Self::finish_after_turn(slf, &data)? {
                        return Ok(());
                    }
                    write(transport, data)?;
                } else {
                    let parts = PyTuple::new(py, [PyBytes::new(py, &head), body.clone()])?;
                    transport.call_method1(intern!(py, "writelines"), (parts,))?;
                }
                if !more && !trailers {
                    return Self::finish(slf); // nothing more to frame
                }
                rest = None;
            } else {
                write(transport, PyBytes::new(py, &head))?;
            }
        }
        if let Some(body) = rest.filter(|_| size > 0) {
            let chunked = {
                let mut me = slf.borrow_mut();
                if me.length != 0 {
                    me.sent += size as i64;
                    if me.length > 0 && me.sent > me.length {
                        return Err(too_long());
                    }
                }
                (me.length != 0).then_some(me.chunked)
            };
            match chunked {
                Some(true) => {
                    let line = format!("{size:x}\r\n");
                    write(
                        transport,
                        joined(py, &[line.as_bytes(), body.as_bytes(), b"\r\n"])?,
                    )?;
                }
                Some(false) => write(transport, body.clone())?,
                None => {}
            }
        }
        if !more {
            Self::body_done(slf)?;
        }
        Ok(())
    }

    fn make_head(slf: &Bound<'_, Self>, body_length: i64) -> PyResult<Vec<u8>> {
        let py = slf.py();
        let (keep_alive, status, headers, http11, is_head, serve_state) = {
            let me = slf.borrow();
            (
                me.keep_alive,
                me.status,
                me.headers.clone_ref(py),
                me.http11,
                me.is_head,
                me.serve_state.clone_ref(py),
            )
        };
        let stopping = serve_state
            .bind(py)
            .getattr(intern!(py, "stopping"))?
            .is_truthy()?;
        let head = asgi_head(
            status,
            headers.bind(py),
            http11,
            keep_alive && !stopping,
            is_head,
            body_length,
        )?;
        let (length, chunked) = head.framing.as_python();
        let mut me = slf.borrow_mut();
        me.keep_alive = head.keep_alive;
        me.length = length;
        me.chunked = chunked;
        Ok(head.bytes)
    }
}
