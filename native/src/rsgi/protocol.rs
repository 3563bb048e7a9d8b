//! The RSGI HTTP protocol object of one request: body reads (awaitables
//! completed by tokio through the bridge) and the response calls, which are
//! synchronous pushes into the request's reply channel. Only the first
//! response call counts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::server::Incoming;
use bytes::Bytes;
use hyper::body::Body;
use hyper::StatusCode;
use pyo3::exceptions::{PyStopAsyncIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use tokio::sync::mpsc;

use super::errors::{RSGIProtocolClosed, RSGIProtocolError};
use super::transport::{HTTPStreamTransport, StreamSlot, STREAM_DEPTH};
use crate::bridge::{Finish, LoopCtx, Outcome};
use crate::server::app_fields::{AppFields, INVISIBLE_VALUE};
use crate::server::{
    BodyRead, BodyStream, Exchange, ExchangeBody, ExchangeHead, Reply, ReplyFields, ReplySlot,
    Tracker,
};

enum BodyState {
    /// The whole body, read before the hand-over (`BridgeDispatch`).
    Read(Bytes),
    /// The client left before all of it came.
    Cut,
    Unread(Incoming),
    /// Being iterated (`async for`), shared with the reading tasks.
    Streaming(Arc<BodyStream>),
    Consumed,
}

const BODY_CUT: &str = "the client closed the connection while sending the body";

/// A body read as the RSGI app sees it: bytes, the end of `async for`, or
/// one of RSGI's exceptions.
fn outcome(read: BodyRead) -> Outcome {
    match read {
        BodyRead::Data(bytes) => Outcome::Bytes(bytes),
        BodyRead::End => Outcome::End,
        BodyRead::Refused(msg) => Outcome::Raise(super::errors::protocol_error, msg),
        BodyRead::Cut(msg) => Outcome::Raise(super::errors::closed, msg),
    }
}

/// The most bytes one step of `async for chunk in protocol` joins from what
/// already arrived (the ASGI cycle's batch).
const ITER_BATCH: usize = 256 * 1024;

#[pyclass(module = "supervise._native", frozen)]
pub struct HTTPProtocol {
    ctx: Arc<LoopCtx>,
    conn: Arc<crate::server::ConnInfo>,
    reply: ReplySlot,
    tracker: Arc<Tracker>,
    limit_body: u64,
    body: Mutex<BodyState>,
    stream: StreamSlot,
    /// The status sent, for the access log (0 until a response call).
    status: AtomicU16,
    /// Body bytes handed to the server (a stream's as they are sent), and
    /// the response's headers as the app gave them: the access log's `%(b)s`
    /// and `%({name}o)s`, and the metrics' byte count.
    sent: Arc<AtomicU64>,
    headers: OnceLock<Py<PyAny>>,
    /// Whether anyone reads those (the access log or metrics): without,
    /// a file response costs no stat and a response no header reference.
    measured: bool,
}

impl HTTPProtocol {
    pub fn new(
        ctx: Arc<LoopCtx>,
        ex: Box<Exchange>,
        measured: bool,
    ) -> (Self, ExchangeHead, Arc<crate::server::ConnInfo>) {
        // Each field is moved out of the box: the Exchange is not copied whole.
        let proto = HTTPProtocol {
            ctx,
            conn: ex.conn.clone(),
            reply: ex.reply,
            tracker: ex.tracker,
            limit_body: ex.limit_body,
            body: Mutex::new(match ex.body {
                ExchangeBody::Incoming(body) => BodyState::Unread(body),
                ExchangeBody::Whole(body) => BodyState::Read(body),
                ExchangeBody::Cut => BodyState::Cut,
            }),
            stream: Arc::new(Mutex::new(None)),
            status: AtomicU16::new(0),
            sent: Arc::default(),
            headers: OnceLock::new(),
            measured,
        };
        (proto, ex.head, ex.conn)
    }

    pub fn reply_slot(&self) -> ReplySlot {
        self.reply.clone()
    }

    fn spawn_read<F>(&self, py: Python<'_>, work: F) -> PyResult<Py<PyAny>>
    where
        F: std::future::Future<Output = Outcome> + Send + 'static,
    {
        self.ctx.spawn(py, self.reply.runtime(), work)
    }

    /// Sends the exchange's reply if it is the first response call, and
    /// notes what the access log reads of it.
    fn send(&self, status: u16, headers: &Bound<'_, PyAny>, reply: Reply, body_len: u64) -> bool {
        if !self.reply.send(reply) {
            return false;
        }
        self.status.store(status, Ordering::Relaxed);
        if self.measured {
            self.sent.fetch_add(body_len, Ordering::Relaxed);
            let _ = self.headers.set(headers.clone().unbind());
        }
        true
    }
}

fn reply_len(reply: &Reply) -> u64 {
    match reply {
        Reply::Full { body, .. } => body.len() as u64,
        _ => 0,
    }
}

impl HTTPProtocol {
    /// What a file response will send, for the access log: the file's size,
    /// or the part of it a range covers (0 when it cannot be read: the
    /// server then answers the error itself; 0 too when nobody measures).
    fn file_len(&self, path: &std::path::Path, range: Option<(u64, u64)>) -> u64 {
        if !self.measured {
            return 0;
        }
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        match range {
            Some((start, end)) => end.min(size).saturating_sub(start),
            None => size,
        }
    }
}

fn status_code(status: u16) -> PyResult<StatusCode> {
    crate::py::response::final_status(status.into())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| PyValueError::new_err(crate::py::response::final_status_error(status)))
}

/// The app's fields, each checked here, where a bad one raises in the app:
/// `http1_codec`'s rule (a token, no CR, LF or NUL, a Content-Length that
/// is a number and agrees with any other), and no byte hyper's map would
/// refuse, so that every protocol takes the same fields.
fn app_fields(headers: &Bound<'_, PyAny>) -> PyResult<ReplyFields> {
    let mut fields = AppFields::new(b"", headers.len().unwrap_or(4));
    for item in headers.try_iter()? {
        let (name, value): (Bound<'_, PyString>, Bound<'_, PyString>) = item?.extract()?;
        let (n, v) = (name.to_str()?.as_bytes(), value.to_str()?.as_bytes());
        fields.push_visible(n, v, true).map_err(|e| {
            PyValueError::new_err(if e == INVISIBLE_VALUE {
                format!("invalid value for header {name}")
            } else {
                format!("{e}: {name}")
            })
        })?;
    }
    Ok(ReplyFields::App(fields))
}

#[pymethods]
impl HTTPProtocol {
    /// `await protocol()`: the whole body, once.
    fn __call__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let state = std::mem::replace(
            &mut *self.body.lock().unwrap_or_else(|e| e.into_inner()),
            BodyState::Consumed,
        );
        match state {
            BodyState::Read(body) => self
                .ctx
                .ready(py, PyBytes::new(py, &body).into_any().unbind()),
            BodyState::Cut => Err(RSGIProtocolClosed::new_err(BODY_CUT)),
            BodyState::Unread(body) if body.is_end_stream() => self
                .ctx
                .ready(py, PyBytes::new(py, b"").into_any().unbind()),
            BodyState::Unread(body) => {
                let stream =
                    BodyStream::new(body, self.limit_body, self.reply.clone(), self.conn.clone());
                self.spawn_read(py, async move { outcome(stream.read_all().await) })
            }
            _ => Err(RSGIProtocolError::new_err(
                "the request body was already read",
            )),
        }
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stream = {
            let mut state = self.body.lock().unwrap_or_else(|e| e.into_inner());
            match &*state {
                BodyState::Read(body) if body.is_empty() => {
                    *state = BodyState::Consumed;
                    return Err(PyStopAsyncIteration::new_err(()));
                }
                BodyState::Read(_) => {
                    let BodyState::Read(body) = std::mem::replace(&mut *state, BodyState::Consumed)
                    else {
                        unreachable!()
                    };
                    return self
                        .ctx
                        .ready(py, PyBytes::new(py, &body).into_any().unbind());
                }
                BodyState::Cut => {
                    *state = BodyState::Consumed;
                    return Err(RSGIProtocolClosed::new_err(BODY_CUT));
                }
                BodyState::Streaming(s) => s.clone(),
                BodyState::Unread(body) if body.is_end_stream() => {
                    *state = BodyState::Consumed;
                    return Err(PyStopAsyncIteration::new_err(()));
                }
                BodyState::Unread(_) => {
                    let BodyState::Unread(body) =
                        std::mem::replace(&mut *state, BodyState::Consumed)
                    else {
                        unreachable!()
                    };
                    let s = BodyStream::new(
                        body,
                        self.limit_body,
                        self.reply.clone(),
                        self.conn.clone(),
                    );
                    *state = BodyState::Streaming(s.clone());
                    s
                }
                BodyState::Consumed => return Err(PyStopAsyncIteration::new_err(())),
            }
        };
        // What already arrived goes up as one chunk: a client sending
        // one-byte chunks cost a loop turn each (29 CPU-seconds for 6 MB).
        self.spawn_read(
            py,
            async move { outcome(stream.next_batch(ITER_BATCH).await) },
        )
    }

    /// Resolves once the client is gone (or the exchange is over).
    fn client_disconnect(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.ctx.when_gone(py, &self.tracker)
    }

    fn response_empty(&self, status: u16, headers: &Bound<'_, PyAny>) -> PyResult<()> {
        let reply = Reply::Full {
            status: status_code(status)?,
            headers: app_fields(headers)?,
            body: Bytes::new(),
        };
        self.send(status, headers, reply, 0);
        Ok(())
    }

    fn response_str(
        &self,
        status: u16,
        headers: &Bound<'_, PyAny>,
        body: &Bound<'_, PyString>,
    ) -> PyResult<()> {
        let reply = Reply::Full {
            status: status_code(status)?,
            headers: app_fields(headers)?,
            body: Bytes::copy_from_slice(body.to_str()?.as_bytes()),
        };
        let len = reply_len(&reply);
        self.send(status, headers, reply, len);
        Ok(())
    }

    fn response_bytes(
        &self,
        status: u16,
        headers: &Bound<'_, PyAny>,
        body: &Bound<'_, PyBytes>,
    ) -> PyResult<()> {
        let reply = Reply::Full {
            status: status_code(status)?,
            headers: app_fields(headers)?,
            body: crate::py::body_bytes::body_bytes(body),
        };
        let len = reply_len(&reply);
        self.send(status, headers, reply, len);
        Ok(())
    }

    fn response_file(
        &self,
        status: u16,
        headers: &Bound<'_, PyAny>,
        file: PathBuf,
    ) -> PyResult<()> {
        let len = self.file_len(&file, None);
        let reply = Reply::File {
            status: status_code(status)?,
            headers: app_fields(headers)?,
            path: file,
            range: None,
        };
        self.send(status, headers, reply, len);
        Ok(())
    }

    /// Bytes `start` up to, not including, `end` (Python's slice convention).
    fn response_file_range(
        &self,
        status: u16,
        headers: &Bound<'_, PyAny>,
        file: PathBuf,
        start: u64,
        end: u64,
    ) -> PyResult<()> {
        if end < start {
            return Err(PyValueError::new_err("end before start"));
        }
        let len = self.file_len(&file, Some((start, end)));
        let reply = Reply::File {
            status: status_code(status)?,
            headers: app_fields(headers)?,
            path: file,
            range: Some((start, end)),
        };
        self.send(status, headers, reply, len);
        Ok(())
    }

    fn response_stream(
        &self,
        status: u16,
        headers: &Bound<'_, PyAny>,
    ) -> PyResult<HTTPStreamTransport> {
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        let reply = Reply::Stream {
            status: status_code(status)?,
            headers: app_fields(headers)?,
            chunks: rx,
            trailers: None,
        };
        // A second response call gets a transport of its own, never filled,
        // whose sends fail: only the first response counts (sharing the
        // first one's slot would have written into that response).
        let (slot, sent) = if self.send(status, headers, reply, 0) {
            *self.stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
            (self.stream.clone(), self.sent.clone())
        } else {
            (StreamSlot::default(), Arc::default())
        };
        Ok(HTTPStreamTransport::new(
            self.ctx.clone(),
            self.reply.runtime().clone(),
            slot,
            sent,
        ))
    }

    /// The status of the response sent (0: none yet), for the access log.
    #[getter]
    pub(crate) fn _status(&self) -> u16 {
        self.status.load(Ordering::Relaxed)
    }

    /// Body bytes handed to the server, for the access log and metrics.
    #[getter]
    pub(crate) fn _sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The response's headers as the app gave them (None: no response).
    #[getter]
    pub(crate) fn _headers(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.headers.get().map(|h| h.clone_ref(py))
    }
}

impl HTTPProtocol {
    /// Called by `AppRun` when the app returned (`error` False) or raised:
    /// a 500 when nothing was sent, a cut connection when a stream is open.
    pub(crate) fn finish(&self, error: bool) -> Finish {
        let stream = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take();
        let result = if self.reply.send(Reply::server_error()) {
            self.status.store(500, Ordering::Relaxed);
            if error {
                Finish::ErrorBeforeResponse
            } else {
                Finish::NoResponse
            }
        } else if error && stream.is_some() {
            // The head is out: the only honest signal left is a cut connection.
            self.tracker.abort();
            Finish::CutOff
        } else if error && self.status.load(Ordering::Relaxed) == 0 {
            Finish::ServerAnswered
        } else {
            Finish::Answered
        };
        drop(stream);
        result
    }
}
