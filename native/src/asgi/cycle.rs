//! `HttpCycle`: one ASGI HTTP request on the engine, the object behind the
//! app's `receive` and `send`. Runs on the loop thread; body reads and
//! backpressured writes run on the connection's runtime and come back
//! through the bridge.
//!
//! The response head is held back until the first body message, so a body
//! sent in one message goes out whole with a Content-Length (hyper's `Full`),
//! and only a body announced with `more_body` is streamed (chunked on
//! HTTP/1.1). The states are the asgi worker's (`http/asgi_cycle.py`); the
//! response's are in `cycle/response_body.rs`.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::server::Incoming;
use bytes::Bytes;
use hyper::body::Body;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::messages::{self, disconnect_message, request_message, Sent};
use crate::bridge::{done, Event, Finish, LoopCtx, Outcome};
use crate::server::app_fields::AppFields;
use crate::server::{
    BodyRead, BodyStream, ConnInfo, Exchange, ExchangeBody, ExchangeHead, Reply, ReplySlot, Tracker,
};

mod response_body;
use response_body::{add_trailers, client_gone, Outbound};

/// Body bytes already received that one `http.request` message carries at
/// most (the asgi worker's high-water mark).
const BATCH: usize = 256 * 1024;

enum Inbound {
    /// The whole body, read before the hand-over (`BridgeDispatch`).
    Read(Bytes),
    Unread(Incoming),
    Reading(Arc<BodyStream>),
    /// The last `http.request` message was given: only a disconnect is left.
    Delivered,
}

#[pyclass(module = "supervise._native", frozen)]
pub struct HttpCycle {
    ctx: Arc<LoopCtx>,
    conn: Arc<ConnInfo>,
    reply: ReplySlot,
    tracker: Arc<Tracker>,
    limit_body: u64,
    inbound: Mutex<Inbound>,
    outbound: Mutex<Outbound>,
    /// For the access log and metrics: the status sent (0: none) and the
    /// body bytes handed over.
    status: AtomicU16,
    sent: AtomicU64,
    /// The client left: its body was cut or broken, or it sent its FIN
    /// while the app waited for a disconnect.
    client_left: Arc<AtomicBool>,
    /// The request's head, kept for its access line (`asgi/access.rs`).
    head: ExchangeHead,
    /// The client a trusted proxy's headers named, if any.
    proxied_client: Option<String>,
    /// The app's response fields, kept for an access line that reads them
    /// (`{name}o`) once `keep_response_fields` asked for them.
    kept_fields: Option<Mutex<Option<AppFields>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HttpCycle {
    pub fn new(ctx: Arc<LoopCtx>, ex: Box<Exchange>) -> Self {
        // Each field is moved out of the box: the Exchange is not copied whole.
        let cut = matches!(ex.body, ExchangeBody::Cut);
        HttpCycle {
            ctx,
            conn: ex.conn,
            reply: ex.reply,
            tracker: ex.tracker,
            limit_body: ex.limit_body,
            inbound: Mutex::new(match ex.body {
                ExchangeBody::Incoming(body) => Inbound::Unread(body),
                ExchangeBody::Whole(body) => Inbound::Read(body),
                ExchangeBody::Cut => Inbound::Delivered,
            }),
            outbound: Mutex::new(Outbound::NotStarted),
            status: AtomicU16::new(0),
            sent: AtomicU64::new(0),
            client_left: Arc::new(AtomicBool::new(cut)),
            head: ex.head,
            proxied_client: None,
            kept_fields: None,
        }
    }

    pub fn head(&self) -> &ExchangeHead {
        &self.head
    }

    /// The client a trusted proxy's headers named (forwarded.rs).
    pub fn set_proxied_client(&mut self, client: Option<String>) {
        self.proxied_client = client;
    }

    /// Keeps the app's response fields for the access line.
    pub fn keep_response_fields(&mut self) {
        self.kept_fields = Some(Mutex::new(None));
    }

    /// The response fields kept, as the `(name, value)` str pairs a line
    /// reads (latin-1, as the asgi worker decodes them); None when not kept.
    pub(crate) fn kept_fields<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyList>> {
        let kept = lock(self.kept_fields.as_ref()?);
        let fields = kept.as_ref()?;
        let latin1 = |b: &[u8]| b.iter().map(|&c| c as char).collect::<String>();
        let pairs = fields
            .fields()
            .map(|(name, value, _)| (latin1(name), latin1(value)))
            .collect::<Vec<_>>();
        PyList::new(py, pairs).ok()
    }

    /// The client's address as the scope gives it, for the access line.
    pub fn client(&self) -> &str {
        self.proxied_client.as_deref().unwrap_or(&self.conn.client)
    }

    pub fn reply_slot(&self) -> ReplySlot {
        self.reply.clone()
    }

    /// Whether the connection can write early hints (a 103) for this request.
    pub fn writes_interim(&self) -> bool {
        self.tracker.interim.is_some()
    }

    pub fn conn(&self) -> Arc<ConnInfo> {
        self.conn.clone()
    }

    /// The client left before the response was complete, or the server
    /// answered the request itself (413, 400 on a broken body).
    fn gone(&self, out: &Outbound) -> bool {
        !matches!(out, Outbound::Complete)
            && (self.tracker.is_gone()
                || self.client_left.load(Ordering::Acquire)
                || (matches!(out, Outbound::NotStarted | Outbound::Started { .. })
                    && self.reply.sent()))
    }

    fn spawn<F>(&self, py: Python<'_>, work: F) -> PyResult<Py<PyAny>>
    where
        F: std::future::Future<Output = Outcome> + Send + 'static,
    {
        self.ctx.spawn(py, self.reply.runtime(), work)
    }

    /// Resolves with `http.disconnect` once the exchange is over or the
    /// client sent its FIN (server/fin_watch.rs).
    fn disconnect(&self, py: Python<'_>, response_done: bool) -> PyResult<Py<PyAny>> {
        if response_done || self.tracker.is_gone() || self.client_left.load(Ordering::Acquire) {
            return self
                .ctx
                .ready(py, messages::disconnect_message(py)?.into_any().unbind());
        }
        let fut = self.ctx.future(py)?;
        let waiter = fut.clone_ref(py);
        let bridge = self.ctx.bridge.clone();
        let (ended, exchange_over) = tokio::sync::oneshot::channel::<()>();
        self.tracker.on_gone(Box::new(move || {
            let _ = ended.send(());
        }));
        let conn = self.conn.clone();
        let left = self.client_left.clone();
        self.reply.runtime().spawn(async move {
            let fin = async {
                match crate::server::client_fin(&conn).await {
                    Ok(()) => true,
                    // Nothing to watch: the exchange's end will say it.
                    Err(_) => std::future::pending().await,
                }
            };
            let fin = tokio::select! {
                biased;
                _ = exchange_over => false,
                fin = fin => fin,
            };
            if fin {
                left.store(true, Ordering::Release);
            }
            bridge.push(Event::Ready(waiter, disconnect()));
        });
        Ok(fut)
    }
}

/// An `http.request` message, made on the loop's thread.
fn received(body: Bytes, more: bool) -> Outcome {
    Outcome::Made(
        |py, body, more| Ok(request_message(py, body, more)?.into_any()),
        body,
        more,
    )
}

/// The `http.disconnect` message, made on the loop's thread.
fn disconnect() -> Outcome {
    Outcome::Made(
        |py, _, _| Ok(disconnect_message(py)?.into_any()),
        Bytes::new(),
        false,
    )
}

impl crate::bridge::ProtocolObject for Py<HttpCycle> {
    fn call_app(&self, py: Python<'_>, app: &Py<PyAny>, scope: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let cycle = self.bind(py);
        let receive = cycle.getattr(pyo3::intern!(py, "receive"))?;
        let send = cycle.getattr(pyo3::intern!(py, "send"))?;
        app.call1(py, (scope, receive, send))
    }

    fn finish(&self, _py: Python<'_>, error: bool) -> Finish {
        self.get().finish(error)
    }

    fn object(&self, py: Python<'_>) -> Py<PyAny> {
        self.clone_ref(py).into_any()
    }

    fn log_access(
        &self,
        py: Python<'_>,
        log: &crate::py::access_format::AccessLog,
        _scope: &Bound<'_, PyAny>,
        seconds: f64,
    ) {
        super::access::log_request(py, log, self.get(), seconds);
    }
}

impl HttpCycle {
    /// Called when the app returned (`error` False) or raised:
    /// a 500 when nothing was sent, a cut connection when a streamed
    /// response is unfinished.
    pub(crate) fn finish(&self, error: bool) -> Finish {
        let out = std::mem::replace(&mut *lock(&self.outbound), Outbound::Complete);
        let gone = self.gone(&out);
        match out {
            Outbound::Complete => Finish::Answered,
            _ if gone => Finish::ClientGone,
            Outbound::NotStarted | Outbound::Started { .. } => {
                self.respond(500, Reply::server_error());
                if error {
                    Finish::ErrorBeforeResponse
                } else if matches!(out, Outbound::NotStarted) {
                    Finish::NoResponse
                } else {
                    Finish::Incomplete
                }
            }
            Outbound::Streaming { .. } | Outbound::Trailers { .. } => {
                // The head is out: the only honest signal left is a cut connection.
                self.tracker.abort();
                drop(out);
                if error {
                    Finish::CutOff
                } else {
                    Finish::Incomplete
                }
            }
        }
    }
}

#[pymethods]
impl HttpCycle {
    fn receive(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let response_done = matches!(*lock(&self.outbound), Outbound::Complete);
        let mut inbound = lock(&self.inbound);
        if response_done || self.tracker.is_gone() || self.client_left.load(Ordering::Acquire) {
            *inbound = Inbound::Delivered;
        }
        let stream = match &*inbound {
            Inbound::Delivered => {
                drop(inbound);
                return self.disconnect(py, response_done);
            }
            Inbound::Read(_) => {
                let Inbound::Read(body) = std::mem::replace(&mut *inbound, Inbound::Delivered)
                else {
                    unreachable!()
                };
                let message = messages::request_message(py, &body, false)?;
                return self.ctx.ready(py, message.into_any().unbind());
            }
            Inbound::Unread(body) if body.is_end_stream() => {
                *inbound = Inbound::Delivered;
                let message = messages::request_message(py, b"", false)?;
                return self.ctx.ready(py, message.into_any().unbind());
            }
            Inbound::Reading(stream) if stream.finished() => {
                *inbound = Inbound::Delivered;
                drop(inbound);
                return self.disconnect(py, false);
            }
            Inbound::Reading(stream) => stream.clone(),
            Inbound::Unread(_) => {
                let Inbound::Unread(body) = std::mem::replace(&mut *inbound, Inbound::Delivered)
                else {
                    unreachable!()
                };
                let stream =
                    BodyStream::new(body, self.limit_body, self.reply.clone(), self.conn.clone());
                *inbound = Inbound::Reading(stream.clone());
                stream
            }
        };
        drop(inbound);
        let cut = self.client_left.clone();
        self.spawn(py, async move {
            match stream.next_batch(BATCH).await {
                BodyRead::Data(body) => received(body, !stream.finished()),
                BodyRead::End => received(Bytes::new(), false),
                // Refused (413, 400: answered already) or cut: for the app,
                // the client is gone, and what it sends next raises.
                _ => {
                    cut.store(true, Ordering::Release);
                    disconnect()
                }
            }
        })
    }

    fn send(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (kind, sent) = messages::read(message)?;
        let mut out = lock(&self.outbound);
        if self.gone(&out) {
            return Err(client_gone(py, &kind));
        }
        match (&*out, sent) {
            (
                Outbound::NotStarted,
                Sent::Start {
                    status,
                    headers,
                    trailers,
                },
            ) => {
                if let Some(kept) = &self.kept_fields {
                    *lock(kept) = Some(headers.clone());
                }
                *out = Outbound::Started {
                    status,
                    headers,
                    trailers,
                };
                Ok(done(py))
            }
            (Outbound::NotStarted, Sent::EarlyHint(head)) => {
                // Only where the connection can write a 1xx (and the scope
                // advertised the extension); elsewhere it is dropped.
                if let Some(interim) = &self.tracker.interim {
                    interim.push(head);
                }
                Ok(done(py))
            }
            (Outbound::NotStarted, _) => Err(messages::unexpected("http.response.start", &kind)),
            (Outbound::Started { .. }, Sent::Body { body, more }) => {
                self.start_body(py, &mut out, body, more)
            }
            (Outbound::Started { .. }, Sent::PathSend { path }) => {
                self.pathsend(py, &mut out, &path)
            }
            (Outbound::Streaming { .. }, Sent::Body { body, more }) => {
                self.stream_body(py, &mut out, body, more)
            }
            (Outbound::Started { .. } | Outbound::Streaming { .. }, _) => {
                Err(messages::unexpected("http.response.body", &kind))
            }
            (Outbound::Trailers { .. }, Sent::Trailers { fields, more }) => {
                add_trailers(&mut out, fields, more);
                Ok(done(py))
            }
            (Outbound::Trailers { .. }, _) => {
                Err(messages::unexpected("http.response.trailers", &kind))
            }
            (Outbound::Complete, _) => Err(PyRuntimeError::new_err(format!(
                "ASGI message '{kind}' sent after the response was complete"
            ))),
        }
    }

    /// The status sent (0: none yet), for the access log and metrics.
    #[getter]
    pub(crate) fn _status(&self) -> u16 {
        self.status.load(Ordering::Relaxed)
    }

    /// Body bytes handed to the server.
    #[getter]
    pub(crate) fn _sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}
