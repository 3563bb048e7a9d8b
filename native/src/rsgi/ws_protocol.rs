//! The RSGI WebSocket protocol object of one upgrade request: `accept()`
//! (an awaitable giving the transport once the 101 is written) or
//! `close(status)` before it (that HTTP status instead of the upgrade).
//! After `accept()`, `close(code)` ends the session with that close code.
//!
//! Rules where the spec is silent (the asgi worker's): before accept, a
//! status that is not an HTTP status from 200 to 599 (a close code such as
//! 1008, or none) refuses with 403; an app that returns without accepting
//! gets 403 too, one that raises 500. After accept: `close()` sends 1000,
//! a code an endpoint may not send (RFC 6455 7.4) is a ValueError; an app
//! that returns without closing closes with 1000, one that raises with 1011.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use hyper::StatusCode;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use tokio::sync::{mpsc, oneshot};

use super::errors::{RSGIProtocolClosed, RSGIProtocolError};
use super::ws_transport::{Receiving, WebsocketTransport, WS_DEPTH};
use crate::bridge::{Event, Finish, LoopCtx};
use crate::server::{ConnInfo, WsAccept, WsAnswer, WsExchange};

enum State {
    /// Not answered yet.
    Handshake(oneshot::Sender<WsAnswer>),
    /// Accepted; the sender until the app's close code went through it.
    Accepted(Option<oneshot::Sender<(u16, String)>>),
    /// Refused (or the handshake was over before the app answered).
    Refused,
}

#[pyclass(module = "supervise._native", frozen)]
pub struct WebsocketProtocol {
    ctx: Arc<LoopCtx>,
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
    app_closed: Arc<AtomicBool>,
    /// 101 once accepted, the refusal status otherwise (0 until then), for the access log.
    status: AtomicU16,
    tracker: Arc<crate::server::Tracker>,
}

/// RFC 6455 7.4.1 and the IANA registry: the codes an endpoint may send.
fn sendable(code: i64) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

fn refusal(status: Option<i64>) -> StatusCode {
    status
        .filter(|s| (200..=599).contains(s))
        .and_then(|s| StatusCode::from_u16(s as u16).ok())
        .unwrap_or(StatusCode::FORBIDDEN)
}

impl WebsocketProtocol {
    pub fn new(
        ctx: Arc<LoopCtx>,
        ex: WsExchange,
    ) -> (Self, hyper::http::request::Parts, Arc<ConnInfo>) {
        let proto = WebsocketProtocol {
            ctx,
            runtime: ex.runtime,
            state: Mutex::new(State::Handshake(ex.answer)),
            app_closed: Arc::new(AtomicBool::new(false)),
            status: AtomicU16::new(0),
            tracker: ex.tracker,
        };
        (proto, ex.head, ex.conn)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers the handshake with `status` unless it was answered; true if this did.
    pub fn refuse(&self, status: StatusCode) -> bool {
        let mut state = self.lock();
        if !matches!(*state, State::Handshake(_)) {
            return false;
        }
        let State::Handshake(tx) = std::mem::replace(&mut *state, State::Refused) else {
            unreachable!()
        };
        self.status.store(status.as_u16(), Ordering::Relaxed);
        let _ = tx.send(WsAnswer::Refuse(status));
        true
    }

    /// Sends the close code unless one was sent; true if this did.
    fn close_with(&self, state: &mut State, code: u16, reason: &str) -> bool {
        if let State::Accepted(closer) = state {
            if let Some(tx) = closer.take() {
                self.app_closed.store(true, Ordering::Relaxed);
                let _ = tx.send((code, reason.to_owned()));
                return true;
            }
        }
        false
    }
}

#[pymethods]
impl WebsocketProtocol {
    /// Accept the upgrade: awaits the transport (the 101 is written first).
    /// `headers` (beyond RSGI, for the ASGI adapter): (name, value) byte
    /// pairs the 101 carries too, checked as response fields are.
    #[pyo3(signature = (*, headers = None))]
    fn accept(
        &self,
        py: Python<'_>,
        headers: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    ) -> PyResult<Py<PyAny>> {
        let extra = extra_headers(headers.unwrap_or_default())?;
        let mut state = self.lock();
        let answer = match std::mem::replace(&mut *state, State::Refused) {
            State::Handshake(tx) => tx,
            other => {
                *state = other;
                return Err(RSGIProtocolError::new_err(
                    "accept() after accept() or close()",
                ));
            }
        };
        let (out_tx, out_rx) = mpsc::channel(WS_DEPTH);
        let (close_tx, close_rx) = oneshot::channel();
        let recv = Receiving::new(self.ctx.bridge.clone());
        let inbox = recv.inbox();
        let transport = Py::new(
            py,
            WebsocketTransport::new(
                self.ctx.clone(),
                self.runtime.clone(),
                recv,
                out_tx,
                self.app_closed.clone(),
            ),
        )?;
        let fut = self.ctx.future(py)?;
        let opened = {
            let bridge = self.ctx.bridge.clone();
            let waiter = fut.clone_ref(py);
            Box::new(move |ok: bool| {
                // On the tokio thread: the Python objects only move, into the loop's queue.
                bridge.push(Event::Call(Box::new(move |py| {
                    let waiter = waiter.bind(py);
                    let _ = if ok {
                        waiter.call_method1(intern!(py, "set_result"), (transport,))
                    } else {
                        let err = RSGIProtocolClosed::new_err("the client left before the upgrade");
                        waiter.call_method1(intern!(py, "set_exception"), (err.into_value(py),))
                    };
                })))
            })
        };
        let accept = WsAccept {
            inbox,
            outgoing: out_rx,
            close: close_rx,
            opened,
            headers: extra,
        };
        if answer.send(WsAnswer::Accept(accept)).is_err() {
            // The server gave up on the handshake: stop, timeout, client gone.
            return Err(RSGIProtocolClosed::new_err(
                "the WebSocket handshake is over (client gone, server stopping, or too late)",
            ));
        }
        *state = State::Accepted(Some(close_tx));
        self.status.store(101, Ordering::Relaxed);
        Ok(fut)
    }

    /// Before accept: refuse with this HTTP status. After: close with this
    /// code (and, beyond RSGI, `reason`: at most 123 bytes, RFC 6455 5.5).
    #[pyo3(signature = (status = None, reason = ""))]
    fn close(&self, status: Option<i64>, reason: &str) -> PyResult<()> {
        if reason.len() > 123 {
            return Err(PyValueError::new_err("a close reason is at most 123 bytes"));
        }
        if self.refuse(refusal(status)) {
            return Ok(());
        }
        let mut state = self.lock();
        if matches!(*state, State::Accepted(Some(_))) {
            let code = match status {
                None => 1000,
                Some(c) if sendable(c) => c as u16,
                Some(c) => {
                    return Err(PyValueError::new_err(format!(
                        "{c} is not a WebSocket close code an endpoint may send \
                         (1000-1003, 1007-1014, 3000-4999)"
                    )))
                }
            };
            self.close_with(&mut state, code, reason);
        }
        Ok(())
    }

    /// Beyond RSGI, for the ASGI adapter's denial response: instead of the
    /// upgrade, this response (the connection then closes). False when the
    /// handshake was answered already.
    fn respond(
        &self,
        status: u16,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
        body: Vec<u8>,
    ) -> PyResult<bool> {
        let status = StatusCode::from_u16(status)
            .ok()
            .filter(|s| s.as_u16() >= 200)
            .ok_or_else(|| PyValueError::new_err(format!("invalid status {status}")))?;
        let fields = headers
            .iter()
            .map(|(n, v)| {
                crate::http1_codec::check_field(n, v)
                    .map(|kind| (&n[..], &v[..], kind))
                    .map_err(|e| {
                        PyValueError::new_err(format!("{e}: {:?}", String::from_utf8_lossy(n)))
                    })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let headers = crate::server::app_fields::header_map(status.as_u16(), fields.into_iter())
            .map_err(PyValueError::new_err)?;
        let mut state = self.lock();
        if !matches!(*state, State::Handshake(_)) {
            return Ok(false);
        }
        let State::Handshake(tx) = std::mem::replace(&mut *state, State::Refused) else {
            unreachable!()
        };
        self.status.store(status.as_u16(), Ordering::Relaxed);
        let body = bytes::Bytes::from(body);
        let _ = tx.send(WsAnswer::Respond {
            status,
            headers,
            body,
        });
        Ok(true)
    }

    /// What the ASGI adapter (`http/asgi_engine_ws.py`) calls when the app
    /// returned (`error` False) or raised.
    fn _finish(&self, error: bool) -> Finish {
        self.finish(error)
    }

    /// Beyond RSGI: resolves once the exchange is over (the handshake refused,
    /// by the app or by the server, or the session ended); what the ASGI
    /// adapter's receive before accept waits for.
    fn client_disconnect(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.ctx.when_gone(py, &self.tracker)
    }

    #[getter]
    pub(crate) fn _status(&self) -> u16 {
        self.status.load(Ordering::Relaxed)
    }
}

/// The extra fields of a 101, checked as response fields are.
fn extra_headers(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<hyper::HeaderMap> {
    let mut map = hyper::HeaderMap::new();
    for (name, value) in pairs {
        let invalid = || {
            PyValueError::new_err(format!(
                "invalid header {:?}: {:?}",
                String::from_utf8_lossy(&name),
                String::from_utf8_lossy(&value)
            ))
        };
        crate::http1_codec::check_field(&name, &value).map_err(|_| invalid())?;
        let n = hyper::header::HeaderName::from_bytes(&name).map_err(|_| invalid())?;
        let v = hyper::header::HeaderValue::from_bytes(&value).map_err(|_| invalid())?;
        map.append(n, v);
    }
    Ok(map)
}

impl WebsocketProtocol {
    /// Called when the app returned (`error` False) or raised: the
    /// handshake refused (403, or 500) if not answered, else the session
    /// closed (1000, or 1011).
    pub(crate) fn finish(&self, error: bool) -> Finish {
        let code = if error { 500 } else { 403 };
        if self.refuse(StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN)) {
            let outcome = if error {
                Finish::ErrorBeforeResponse
            } else {
                Finish::Answered
            };
            return outcome;
        }
        let mut state = self.lock();
        let accepted = matches!(*state, State::Accepted(_));
        self.close_with(&mut state, if error { 1011 } else { 1000 }, "");

        match (error, accepted) {
            (false, _) => Finish::Answered,
            (true, true) => Finish::CutOff,
            (true, false) => Finish::ErrorBeforeResponse,
        }
    }
}
