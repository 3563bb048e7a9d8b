//! The stream transport `response_stream()` returns. A send that finds the
//! channel full awaits until hyper has written earlier chunks (the channel is
//! small, so a slow client slows the app down instead of filling memory).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::errors::RSGIProtocolClosed;
use crate::bridge::{LoopCtx, Outcome};

/// Chunks queued between the app and the socket before `send_bytes` waits.
pub const STREAM_DEPTH: usize = 4;

pub type StreamSlot = Arc<Mutex<Option<mpsc::Sender<Bytes>>>>;

#[pyclass(module = "supervise._native", frozen)]
pub struct HTTPStreamTransport {
    ctx: Arc<LoopCtx>,
    runtime: tokio::runtime::Handle,
    slot: StreamSlot,
    /// The protocol's count of body bytes sent, for the access log.
    sent: Arc<AtomicU64>,
}

impl HTTPStreamTransport {
    pub fn new(
        ctx: Arc<LoopCtx>,
        runtime: tokio::runtime::Handle,
        slot: StreamSlot,
        sent: Arc<AtomicU64>,
    ) -> Self {
        HTTPStreamTransport {
            ctx,
            runtime,
            slot,
            sent,
        }
    }

    fn send(&self, py: Python<'_>, data: Bytes) -> PyResult<Py<PyAny>> {
        let tx = self
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| RSGIProtocolClosed::new_err("the response stream is closed"))?;
        // Counted once queued for the socket.
        let len = data.len() as u64;
        match tx.try_send(data) {
            Ok(()) => {
                self.sent.fetch_add(len, Ordering::Relaxed);
                self.ctx.ready(py, py.None())
            }
            Err(TrySendError::Closed(_)) => Err(RSGIProtocolClosed::new_err(
                "the client closed the connection",
            )),
            Err(TrySendError::Full(data)) => {
                let sent = self.sent.clone();
                self.ctx.spawn(py, &self.runtime, async move {
                    match tx.send(data).await {
                        Ok(()) => {
                            sent.fetch_add(len, Ordering::Relaxed);
                            Outcome::None
                        }
                        Err(_) => Outcome::Raise(
                            super::errors::closed,
                            "the client closed the connection",
                        ),
                    }
                })
            }
        }
    }
}

#[pymethods]
impl HTTPStreamTransport {
    fn send_bytes(&self, py: Python<'_>, data: &Bound<'_, PyBytes>) -> PyResult<Py<PyAny>> {
        self.send(py, crate::py::body_bytes::body_bytes(data))
    }

    fn send_str(&self, py: Python<'_>, data: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        self.send(py, Bytes::copy_from_slice(data.to_str()?.as_bytes()))
    }
}
