//! One WSGI request on the engine: the environ, the app call and what the
//! app returned (`Produced`), on the runtime thread that read the request.
//! HTTP/1.1 connections are driven by `h1.rs` (h1's parser and head builder,
//! as the Python workers frame responses); HTTP/2 ones by hyper, through
//! `Dispatch::dispatch` here (the body read whole by a task first).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::StatusCode;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::app::WsgiApp;
use super::clock::AppClock;
use super::input::WsgiInput;
use super::spool::{RequestBody, Spool};
use super::start::{as_bytes, StartResponse};
use super::stream;
use super::stream::Pump;
use crate::bridge::RequestView;
use crate::py::environ::{self, put, HeadView};
use crate::py::file_wrapper::FileWrapper;
use crate::py::repeats::Repeats;
use crate::server::{
    BodyRead, BodyStream, BoxIo, ConnInfo, Dispatch, Exchange, ExchangeBody, ExchangeHead, Reply,
    ReplyFields, ReplySlot, Served, Shared, Tracker, WsAnswer,
};

pub struct WsgiDispatch(Arc<Engine>);

pub(super) struct Engine {
    pub app: Py<PyAny>,
    base: Py<PyDict>,
    on_error: Py<PyAny>,
    pub finished: Option<Py<PyAny>>,
    proxy: Option<Py<PyAny>>,
    /// The header names (lower-case) that make a request go through `proxy`.
    proxy_headers: Vec<Box<[u8]>>,
    body_timeout: Option<Duration>,
    /// `--no-sendfile` off: files go by sendfile(2) where the socket allows.
    pub sendfile: bool,
    pub clock: Arc<AppClock>,
}

/// One request's own state while the app runs and its body streams.
pub(super) struct Call {
    pub environ: Py<PyDict>,
    pub start: Py<StartResponse>,
    pub started: Option<Instant>,
}

impl WsgiDispatch {
    pub fn new(py: Python<'_>, app: &WsgiApp, clock: Arc<AppClock>) -> Self {
        WsgiDispatch(Arc::new(Engine {
            app: app.app.clone_ref(py),
            base: app.base.clone_ref(py),
            on_error: app.on_error.clone_ref(py),
            finished: app.finished.as_ref().map(|f| f.clone_ref(py)),
            proxy: app.proxy.as_ref().map(|f| f.clone_ref(py)),
            proxy_headers: app
                .proxy_headers
                .iter()
                .map(|name| name.to_ascii_lowercase().into_bytes().into())
                .collect(),
            body_timeout: (app.body_timeout > 0.0)
                .then(|| Duration::from_secs_f64(app.body_timeout)),
            sendfile: app.sendfile,
            clock,
        }))
    }
}

impl Dispatch for WsgiDispatch {
    fn dispatch(&self, ex: Exchange) {
        let Exchange {
            head,
            body,
            conn,
            reply,
            tracker,
            limit_body,
            ..
        } = ex;
        let engine = self.0.clone();
        let body = match body {
            ExchangeBody::Whole(b) => {
                engine.serve(&head, &conn, RequestBody::Memory(b), &reply, tracker);
                return;
            }
            ExchangeBody::Incoming(b) if hyper::body::Body::is_end_stream(&b) => {
                engine.serve(&head, &conn, RequestBody::empty(), &reply, tracker);
                return;
            }
            ExchangeBody::Incoming(b) => b,
            ExchangeBody::Cut => return, // the client left: nobody to answer
        };
        tokio::spawn(async move {
            // A body over the limit, or a malformed one, was answered by the
            // reader (413, 400); a client that left needs no answer.
            let reader = BodyStream::new(body, limit_body, reply.clone(), conn.clone());
            if let Some(data) = read_body(&reader, engine.body_timeout, &reply).await {
                engine.serve(&head, &conn, data, &reply, tracker);
            }
        });
    }

    /// Keeps a Python thread state for the thread's whole life: without it
    /// every GIL hold of a non-Python thread creates and destroys one (and
    /// its frame stack: an mmap and an munmap per request).
    fn serves_h1(&self) -> bool {
        true
    }

    fn serve_h1(
        &self,
        io: BoxIo,
        conn: Arc<ConnInfo>,
        shared: Arc<Shared>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Served {
        Box::pin(super::direct_http1::serve(
            self.0.clone(),
            io,
            conn,
            shared,
            stop,
        ))
    }

    fn thread_started(&self) {
        // SAFETY: Python is initialised (the worker runs it); Ensure takes the
        // GIL and makes the thread state, SaveThread gives the GIL back and
        // leaves the state's count at 1, so later holds reuse it.
        unsafe {
            pyo3::ffi::PyGILState_Ensure();
            pyo3::ffi::PyEval_SaveThread();
        }
    }

    fn thread_stopping(&self) {
        // SAFETY: undoes thread_started on the same thread: one more Ensure
        // (GIL held, count 2), then both releases; the last one (count 0)
        // deletes the thread state and lets the GIL go.
        unsafe {
            if pyo3::ffi::Py_IsInitialized() == 0 {
                return;
            }
            let state = pyo3::ffi::PyGILState_Ensure();
            pyo3::ffi::PyGILState_Release(pyo3::ffi::PyGILState_STATE::PyGILState_LOCKED);
            pyo3::ffi::PyGILState_Release(state);
        }
    }

    fn dispatch_ws(&self, ex: crate::server::WsExchange) {
        // Not reached: the engine serves WSGI with WebSockets off, so an
        // upgrade request is a plain request for the app.
        let _ = ex
            .answer
            .send(WsAnswer::Refuse(StatusCode::NOT_IMPLEMENTED));
    }
}

/// What the app's answer became, status and fields staying in `StartResponse`.
pub(super) enum Produced {
    /// The whole body (a list, or an iterable that ended at once).
    Whole(Bytes),
    /// An iterable with more to come: its first block, and the rest.
    Stream(Pump, Bytes),
    /// A file_wrapper over a regular file: `len` bytes from its position.
    File(std::fs::File, u64),
    /// Failed before the head was out: a 500 (logged already).
    Error,
    /// Failed after it: what the app wrote goes out, then the cut (logged).
    Cut(Vec<Bytes>),
    /// The proxy headers contradict each other: 400.
    BadProxy,
}

impl Engine {
    /// HTTP/2 and HTTP/3 (and HTTP/1.1 after a hand-over to hyper): the
    /// request as hyper or h3 parsed it.
    fn serve(
        self: &Arc<Self>,
        head: &ExchangeHead,
        conn: &ConnInfo,
        body: RequestBody,
        reply: &ReplySlot,
        tracker: Arc<Tracker>,
    ) {
        let _busy = self.clock.enter();
        let answer = Python::attach(|py| {
            let head = RequestView::of(head);
            let proxied = self.proxied(&head);
            // One request on this connection's environ: filled in place.
            let environ = self
                .connection_environ(py, conn)
                .and_then(|env| self.add_request(env, &head, body, &mut Repeats::none()));
            let (call, produced) = self.run(py, environ, proxied);
            self.reply(py, call, produced, tracker)
        });
        reply.send(answer);
    }

    pub(super) fn body_timeout(&self) -> Option<Duration> {
        self.body_timeout
    }

    /// Whether the proxy-header rules apply to a request with this head: it
    /// carries one of their headers.
    pub(super) fn proxied(&self, head: &impl HeadView) -> bool {
        self.proxy.is_some()
            && (0..head.field_count()).any(|i| {
                let name = head.field(i).0;
                self.proxy_headers.iter().any(|wanted| **wanted == *name)
            })
    }

    /// The app called for one request's environ (built by the caller),
    /// after the proxy-header rules when `proxied`.
    pub(super) fn run(
        self: &Arc<Self>,
        py: Python<'_>,
        environ: PyResult<Bound<'_, PyDict>>,
        proxied: bool,
    ) -> (Option<Call>, Produced) {
        let started = self.finished.as_ref().map(|_| Instant::now());
        let environ = match environ {
            Ok(env) => env,
            Err(err) => {
                err.print(py);
                return (None, Produced::Error);
            }
        };
        if let Some(proxy) = self.proxy.as_ref().filter(|_| proxied) {
            if let Err(err) = proxy.call1(py, (&environ,)) {
                if err.is_instance_of::<PyValueError>(py) {
                    return (None, Produced::BadProxy);
                }
                self.report(py, &environ, err, "proxy headers");
                return (None, Produced::Error);
            }
        }
        let call = match Py::new(py, StartResponse::default()) {
            Ok(start) => Call {
                environ: environ.unbind(),
                start,
                started,
            },
            Err(err) => {
                err.print(py);
                return (None, Produced::Error);
            }
        };
        let produced = self
            .app
            .call1(py, (call.environ.clone_ref(py), call.start.clone_ref(py)))
            .and_then(|result| self.respond(py, &call, result.bind(py)));
        let produced = match produced {
            Ok(produced) => produced,
            Err(err) => self.failed(py, &call, err),
        };
        (Some(call), produced)
    }

    /// The app raised: a 500 while its head is not out, else what it wrote
    /// and then the cut (the client must not take a truncated body for a
    /// whole one). Logged with the request line.
    fn failed(&self, py: Python<'_>, call: &Call, err: PyErr) -> Produced {
        let mut start = call.start.borrow_mut(py);
        if start.status_code().is_none() || !start.committed {
            drop(start);
            self.report(py, call.environ.bind(py), err, "");
            return Produced::Error;
        }
        let written = std::mem::take(&mut start.written);
        drop(start);
        self.report(py, call.environ.bind(py), err, "response cut off");
        Produced::Cut(written)
    }

    /// The keys every request of a connection shares: the base, the
    /// scheme, the peer's and the server's addresses (the Python workers'
    /// middle layer: made once per connection, copied per request, in a
    /// table with room for the request's own keys).
    pub(super) fn connection_environ<'py>(
        &self,
        py: Python<'py>,
        conn: &ConnInfo,
    ) -> PyResult<Bound<'py, PyDict>> {
        let base = self.base.bind(py);
        let env = dict_with_room(py, base.len() + REQUEST_KEYS)?;
        for (key, value) in base.iter() {
            env.set_item(key, value)?;
        }
        if conn.scheme == "https" {
            put(&env, intern!(py, "wsgi.url_scheme"), intern!(py, "https"))?;
        }
        match split_addr(&conn.client) {
            Some((addr, port)) => {
                put(&env, intern!(py, "REMOTE_ADDR"), &PyString::new(py, addr))?;
                put(&env, intern!(py, "REMOTE_PORT"), &PyString::new(py, port))?;
                if let Some((addr, port)) = split_addr(&conn.server) {
                    put(&env, intern!(py, "SERVER_NAME"), &PyString::new(py, addr))?;
                    put(&env, intern!(py, "SERVER_PORT"), &PyString::new(py, port))?;
                }
            }
            // A unix socket: the peer has no name; the server's is the base's.
            None => put(&env, intern!(py, "REMOTE_ADDR"), intern!(py, ""))?,
        }
        Ok(env)
    }

    /// One request's environ: a copy of its connection's, the head's keys
    /// (one builder for every server), the body.
    pub(super) fn environ<'py>(
        &self,
        connection: &Bound<'py, PyDict>,
        head: &impl HeadView,
        body: RequestBody,
        repeats: &mut Repeats,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.add_request(connection.copy()?, head, body, repeats)
    }

    /// The head's keys and the body, added to `env`.
    fn add_request<'py>(
        &self,
        env: Bound<'py, PyDict>,
        head: &impl HeadView,
        body: RequestBody,
        repeats: &mut Repeats,
    ) -> PyResult<Bound<'py, PyDict>> {
        environ::fill(&env, head, repeats)?;
        env.set_item(intern!(env.py(), "wsgi.input"), WsgiInput::new(body))?;
        Ok(env)
    }

    /// The app's result: a list whole, a file_wrapper over a regular file
    /// from Rust, anything else iterated up to its first block (the caller
    /// streams the rest).
    fn respond(
        &self,
        py: Python<'_>,
        call: &Call,
        result: &Bound<'_, PyAny>,
    ) -> PyResult<Produced> {
        if let Ok(list) = result.cast_exact::<PyList>() {
            let mut blocks = Vec::with_capacity(list.len());
            for item in list.iter() {
                blocks.push(as_bytes(&item)?);
            }
            return self.whole(py, call, blocks);
        }
        if let Ok(wrapper) = result.cast_exact::<FileWrapper>() {
            if let Some((file, len)) = stream::file(py, call, wrapper.get().file(py))? {
                close(py, result);
                return Ok(Produced::File(file, len));
            }
        }
        let iter = match result.try_iter() {
            Ok(iter) => iter,
            Err(err) => {
                close(py, result);
                return Err(err);
            }
        };
        let mut pump = Pump::new(iter.unbind(), result.clone().unbind());
        match pump.step(py, call) {
            Ok(None) => {
                // Iterated to its end already: a whole body after all.
                pump.close(py);
                self.whole(py, call, Vec::new())
            }
            Ok(Some(first)) => {
                let mut start = call.start.borrow_mut(py);
                if start.status_code().is_none() {
                    drop(start);
                    pump.close(py);
                    return Err(no_start_response());
                }
                start.committed = true;
                Ok(Produced::Stream(pump, first))
            }
            Err(err) => {
                pump.close(py);
                Err(err)
            }
        }
    }

    /// A body known in full, never more than the app's Content-Length.
    fn whole(&self, py: Python<'_>, call: &Call, blocks: Vec<Bytes>) -> PyResult<Produced> {
        let mut start = call.start.borrow_mut(py);
        if start.status_code().is_none() {
            return Err(no_start_response());
        }
        start.committed = true;
        let mut written = std::mem::take(&mut start.written);
        let mut body = if written.is_empty() {
            stream::join(blocks) // nearly always: no write() calls
        } else {
            written.extend(blocks);
            stream::join(written)
        };
        if let Some(n) = start.length {
            body.truncate(n as usize);
        }
        Ok(Produced::Whole(body))
    }

    /// hyper's reply for what the app produced (HTTP/2).
    fn reply(
        self: &Arc<Self>,
        py: Python<'_>,
        call: Option<Call>,
        produced: Produced,
        tracker: Arc<Tracker>,
    ) -> Reply {
        let Some(call) = call else {
            return match produced {
                Produced::BadProxy => Reply::bad_request("Contradictory scheme headers"),
                _ => Reply::server_error(),
            };
        };
        let start = call.start.borrow(py);
        let status = start
            .status_code()
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers: ReplyFields = match start.header_map() {
            Ok(headers) => headers.into(),
            Err(err) => {
                drop(start);
                self.report(py, call.environ.bind(py), err, "");
                self.done(py, &call, 500, 0);
                return Reply::server_error();
            }
        };
        drop(start);
        match produced {
            Produced::Whole(body) => {
                self.done(py, &call, status.as_u16(), body.len() as u64);
                Reply::Full {
                    status,
                    headers,
                    body,
                }
            }
            Produced::File(file, len) => {
                self.done(py, &call, status.as_u16(), len);
                Reply::Opened {
                    status,
                    headers,
                    file,
                    len,
                }
            }
            Produced::Stream(pump, first) => {
                let chunks = stream::spawn(py, self.clone(), call, pump, first, tracker);
                Reply::Stream {
                    status,
                    headers,
                    chunks,
                    trailers: None,
                }
            }
            Produced::Cut(written) => {
                let (tx, rx) = tokio::sync::mpsc::channel(written.len().max(1));
                let sent = written.iter().map(|b| b.len() as u64).sum();
                for block in written {
                    let _ = tx.try_send(block);
                }
                tracker.abort();
                self.done(py, &call, status.as_u16(), sent);
                Reply::Stream {
                    status,
                    headers,
                    chunks: rx,
                    trailers: None,
                }
            }
            Produced::Error | Produced::BadProxy => {
                self.done(py, &call, 500, 0);
                Reply::server_error()
            }
        }
    }

    /// Logs an app failure with its request line (Python's logger, traceback).
    pub fn report(&self, py: Python<'_>, environ: &Bound<'_, PyDict>, err: PyErr, what: &str) {
        if let Err(e) = self.on_error.call1(py, (environ, err.into_value(py), what)) {
            e.print(py);
        }
    }

    /// The access log, metrics and post_request, when something wants them.
    pub fn done(&self, py: Python<'_>, call: &Call, status: u16, sent: u64) {
        let (Some(finished), Some(started)) = (&self.finished, call.started) else {
            return;
        };
        let start = call.start.borrow(py);
        let headers = start.app_headers.as_ref().map(|h| h.clone_ref(py));
        drop(start);
        let args = (
            call.environ.clone_ref(py),
            status,
            headers,
            sent,
            started.elapsed().as_secs_f64(),
        );
        if let Err(e) = finished.call1(py, args) {
            e.print(py);
        }
    }
}

/// The whole body, each wait for more bounded by `idle` (408 past it), in a
/// temporary file past `SPOOL_AT`. None when there is nothing to serve: the
/// reader answered (413, 400), or the client left.
async fn read_body(
    reader: &BodyStream,
    idle: Option<Duration>,
    reply: &ReplySlot,
) -> Option<RequestBody> {
    let mut spool = Spool::default();
    loop {
        let next = reader.next();
        let outcome = match idle {
            None => next.await,
            Some(idle) => match tokio::time::timeout(idle, next).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    reply.send(Reply::body_timed_out());
                    return None;
                }
            },
        };
        match outcome {
            BodyRead::Data(block) => {
                if spool.push(&block).is_err() {
                    reply.send(Reply::server_error());
                    return None;
                }
            }
            BodyRead::End => return Some(spool.finish()),
            _ => return None,
        }
    }
}

pub(super) fn no_start_response() -> PyErr {
    pyo3::exceptions::PyAssertionError::new_err("the application did not call start_response()")
}

/// PEP 3333: the iterable's close() is called once the server is done with it.
pub(super) fn close(py: Python<'_>, result: &Bound<'_, PyAny>) {
    if result.is_exact_instance_of::<PyList>() {
        return;
    }
    if let Ok(close) = result.getattr(intern!(py, "close")) {
        if let Err(e) = close.call0() {
            e.print(py);
        }
    }
}

/// Room for the keys a request adds to its connection's environ (the
/// request line's, a dozen HTTP_* fields, wsgi.input).
const REQUEST_KEYS: usize = 20;

/// An empty dict with a table for `n` keys. Each request's environ is a copy
/// of its connection's, and a copy keeps the table's size: made with room,
/// the request's keys fit without a resize, which rebuilt the table's index
/// on every request (`build_indices_unicode`, ~1% of a small one).
fn dict_with_room(py: Python<'_>, n: usize) -> PyResult<Bound<'_, PyDict>> {
    // SAFETY: _PyDict_NewPresized returns a new reference to a dict, or NULL
    // with an exception set.
    unsafe {
        let dict = pyo3::ffi::_PyDict_NewPresized(n as pyo3::ffi::Py_ssize_t);
        Ok(Bound::from_owned_ptr_or_err(py, dict)?.cast_into_unchecked())
    }
}

/// "addr:port" (or "[v6]:port") into its parts; None for "" (a unix socket).
fn split_addr(addr: &str) -> Option<(&str, &str)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.trim_start_matches('[').trim_end_matches(']'), port))
}
