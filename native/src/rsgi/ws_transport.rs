//! The transport `accept()` returns, and the messages `receive()` gives.
//!
//! `receive()` takes what the session queued (`WsInbox`): a queued message
//! is returned as a `Ready` awaitable, no loop turn; with none queued it
//! returns a future that the session's wake-up completes through the bridge.
//! A receive the app cancelled leaves its message queued for the next one.
//! The close message (kind 0) comes once, after every message received
//! before it; a receive after it raises `RSGIProtocolClosed`.
//!
//! `send_bytes`/`send_str` push into a bounded channel: `Ready` while there
//! is room, else a future completed once the session took earlier messages
//! (a slow client slows the app down). Once the session is closing (either
//! side closed, or the connection broke) they raise `RSGIProtocolClosed`.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::errors::{RSGIProtocolClosed, RSGIProtocolError};
use crate::bridge::{Bridge, Event, LoopCtx, Outcome};
use crate::server::{WsIn, WsInbox};

/// Outgoing messages queued between the app and the socket before a send waits.
pub const WS_DEPTH: usize = 16;

// RSGI's WebsocketMessageType.
const KIND_CLOSE: u8 = 0;
const KIND_BYTES: u8 = 1;
const KIND_STRING: u8 = 2;

const CLOSED: &str = "the WebSocket is closed";

/// One received message: `kind` 0 (closed), 1 (bytes) or 2 (str), and `data`
/// (None for a close). Beyond RSGI, a close carries its `code` and `reason`
/// (the ASGI adapter's websocket.disconnect).
#[pyclass(module = "supervise._native", frozen)]
pub struct WebsocketMessage {
    #[pyo3(get)]
    kind: u8,
    #[pyo3(get)]
    data: Option<Py<PyAny>>,
    #[pyo3(get)]
    code: u16,
    #[pyo3(get)]
    reason: String,
}

#[pymethods]
impl WebsocketMessage {
    fn __repr__(&self) -> String {
        format!("<WebsocketMessage kind={}>", self.kind)
    }
}

fn message(py: Python<'_>, m: &WsIn) -> PyResult<Py<PyAny>> {
    let (kind, data, code, reason) = match m {
        WsIn::Binary(b) => (
            KIND_BYTES,
            Some(PyBytes::new(py, b).into_any().unbind()),
            0,
            String::new(),
        ),
        WsIn::Text(t) => (
            KIND_STRING,
            Some(PyString::new(py, t.as_str()).into_any().unbind()),
            0,
            String::new(),
        ),
        WsIn::Closed(code, reason) => (KIND_CLOSE, None, *code, reason.clone()),
    };
    let message = WebsocketMessage {
        kind,
        data,
        code,
        reason,
    };
    Ok(Py::new(py, message)?.into_any())
}

/// The receive side of one session, kept on the loop thread.
pub struct Receiving {
    inbox: Arc<WsInbox>,
    /// The future of a receive waiting for a message.
    pending: Mutex<Option<Py<PyAny>>>,
    /// The close message was handed to the app.
    closed_seen: AtomicBool,
}

impl Receiving {
    pub fn new(bridge: Arc<Bridge>) -> Arc<Self> {
        Arc::new_cyclic(|me: &Weak<Receiving>| {
            // Weak: the inbox (which the session holds) must not keep this alive.
            let me = me.clone();
            let wake = Box::new(move || {
                if let Some(recv) = me.upgrade() {
                    bridge.push(Event::Call(Box::new(move |py| recv.deliver(py))));
                }
            });
            Receiving {
                inbox: Arc::new(WsInbox::new(wake)),
                pending: Mutex::new(None),
                closed_seen: AtomicBool::new(false),
            }
        })
    }

    pub fn inbox(&self) -> Arc<WsInbox> {
        self.inbox.clone()
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Option<Py<PyAny>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// On the loop thread, once a message came for a waiting receive.
    fn deliver(&self, py: Python<'_>) {
        let Some(fut) = self.lock_pending().take() else {
            return;
        };
        let Some(m) = self.inbox.take() else {
            *self.lock_pending() = Some(fut);
            return;
        };
        let delivered = message(py, &m).and_then(|msg| {
            fut.bind(py)
                .call_method1(intern!(py, "set_result"), (msg,))
                .map(drop)
        });
        match delivered {
            Ok(()) if matches!(m, WsIn::Closed(..)) => {
                self.closed_seen.store(true, Ordering::Relaxed)
            }
            Ok(()) => {}
            // The app cancelled that receive: the message waits for the next.
            Err(_) => self.inbox.put_back(m),
        }
    }
}

#[pyclass(module = "supervise._native", frozen)]
pub struct WebsocketTransport {
    ctx: Arc<LoopCtx>,
    runtime: tokio::runtime::Handle,
    recv: Arc<Receiving>,
    out: mpsc::Sender<Message>,
    /// The app closed the session (`protocol.close()`).
    app_closed: Arc<AtomicBool>,
}

impl WebsocketTransport {
    pub fn new(
        ctx: Arc<LoopCtx>,
        runtime: tokio::runtime::Handle,
        recv: Arc<Receiving>,
        out: mpsc::Sender<Message>,
        app_closed: Arc<AtomicBool>,
    ) -> Self {
        WebsocketTransport {
            ctx,
            runtime,
            recv,
            out,
            app_closed,
        }
    }

    fn send(&self, py: Python<'_>, m: Message) -> PyResult<Py<PyAny>> {
        if self.app_closed.load(Ordering::Relaxed) || self.recv.inbox.is_ended() {
            return Err(RSGIProtocolClosed::new_err(CLOSED));
        }
        match self.out.try_send(m) {
            Ok(()) => self.ctx.ready(py, py.None()),
            Err(TrySendError::Closed(_)) => Err(RSGIProtocolClosed::new_err(CLOSED)),
            Err(TrySendError::Full(m)) => {
                let out = self.out.clone();
                self.ctx.spawn(py, &self.runtime, async move {
                    match out.send(m).await {
                        Ok(()) => Outcome::None,
                        Err(_) => Outcome::Raise(super::errors::closed, CLOSED),
                    }
                })
            }
        }
    }
}

#[pymethods]
impl WebsocketTransport {
    /// The next message (kind 0 once, when the session is over).
    fn receive(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let recv = &self.recv;
        if recv.closed_seen.load(Ordering::Relaxed) {
            return Err(RSGIProtocolClosed::new_err(CLOSED));
        }
        {
            let mut pending = recv.lock_pending();
            if let Some(f) = pending.as_ref() {
                if !f.bind(py).call_method0(intern!(py, "done"))?.is_truthy()? {
                    return Err(RSGIProtocolError::new_err(
                        "receive() called while another receive() waits",
                    ));
                }
                *pending = None;
            }
        }
        match recv.inbox.take() {
            Some(m) => {
                if matches!(m, WsIn::Closed(..)) {
                    recv.closed_seen.store(true, Ordering::Relaxed);
                }
                self.ctx.ready(py, message(py, &m)?)
            }
            None => {
                let fut = self.ctx.future(py)?;
                *recv.lock_pending() = Some(fut.clone_ref(py));
                Ok(fut)
            }
        }
    }

    fn send_bytes(&self, py: Python<'_>, data: Cow<'_, [u8]>) -> PyResult<Py<PyAny>> {
        let data = match data {
            Cow::Borrowed(b) => Bytes::copy_from_slice(b),
            Cow::Owned(v) => Bytes::from(v),
        };
        self.send(py, Message::Binary(data))
    }

    fn send_str(&self, py: Python<'_>, data: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let text = Utf8Bytes::from(data.to_str()?.to_owned());
        self.send(py, Message::Text(text))
    }
}
