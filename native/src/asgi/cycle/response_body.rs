//! The response side of `HttpCycle`: the states an ASGI response goes
//! through on the engine, and what each body message does. A body in one
//! message goes out whole with its length; one announced with `more_body`
//! is streamed through a short queue, so `send` waits (off the loop) for a
//! slow client; announced trailers are gathered and handed over once.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use hyper::{HeaderMap, StatusCode};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};

use super::HttpCycle;
use crate::bridge::{done, Outcome};
use crate::server::app_fields::AppFields;
use crate::server::{Reply, ReplyFields};

/// Chunks queued between the app and the socket before `send` waits.
const STREAM_DEPTH: usize = 4;

pub(super) enum Outbound {
    NotStarted,
    /// `http.response.start` came; the head waits for the first body message.
    Started {
        status: u16,
        headers: AppFields,
        trailers: bool,
    },
    Streaming {
        chunks: mpsc::Sender<Bytes>,
        trailers: Option<oneshot::Sender<HeaderMap>>,
    },
    /// The body is complete; the trailers it announced are still to come
    /// (gathered until the last message: the server writes them once).
    /// No sender when they cannot be sent (a file response).
    Trailers {
        tx: Option<oneshot::Sender<HeaderMap>>,
        fields: HeaderMap,
    },
    Complete,
}

/// The state once the body is complete.
fn after_body(trailers: Option<oneshot::Sender<HeaderMap>>, announced: bool) -> Outbound {
    if announced {
        Outbound::Trailers {
            tx: trailers,
            fields: HeaderMap::new(),
        }
    } else {
        Outbound::Complete
    }
}

impl HttpCycle {
    pub(super) fn respond(&self, status: u16, reply: Reply) {
        if self.reply.send(reply) {
            self.status.store(status, Ordering::Relaxed);
        }
    }

    /// Queues one chunk of a streamed body; waits (off the loop) when the
    /// queue is full, so a slow client slows the app down.
    fn push(&self, py: Python<'_>, tx: &mpsc::Sender<Bytes>, chunk: Bytes) -> PyResult<Py<PyAny>> {
        self.sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        match tx.try_send(chunk) {
            Ok(()) => Ok(done(py)),
            Err(TrySendError::Closed(_)) => Err(client_gone(py, "http.response.body")),
            Err(TrySendError::Full(chunk)) => {
                let tx = tx.clone();
                self.spawn(py, async move {
                    match tx.send(chunk).await {
                        Ok(()) => Outcome::None,
                        Err(_) => Outcome::Raise(gone_while_waiting, "the client went away"),
                    }
                })
            }
        }
    }

    pub(super) fn start_body(
        &self,
        py: Python<'_>,
        out: &mut Outbound,
        body: Bytes,
        more: bool,
    ) -> PyResult<Py<PyAny>> {
        let (status, code, headers, trailers) = take_started(out);
        if !more && !trailers {
            self.sent.fetch_add(body.len() as u64, Ordering::Relaxed);
            self.respond(
                status,
                Reply::Full {
                    status: code,
                    headers: ReplyFields::App(headers),
                    body,
                },
            );
            return Ok(done(py));
        }
        // Trailers need a streamed body: chunked framing on HTTP/1.1.
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        let (trailers_tx, trailers_rx) = if trailers {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.respond(
            status,
            Reply::Stream {
                status: code,
                headers: ReplyFields::App(headers),
                chunks: rx,
                trailers: trailers_rx,
            },
        );
        let waits = if body.is_empty() {
            done(py)
        } else {
            self.push(py, &tx, body)?
        };
        *out = if more {
            Outbound::Streaming {
                chunks: tx,
                trailers: trailers_tx,
            }
        } else {
            after_body(trailers_tx, trailers)
        };
        Ok(waits)
    }

    pub(super) fn pathsend(
        &self,
        py: Python<'_>,
        out: &mut Outbound,
        path: &std::path::Path,
    ) -> PyResult<Py<PyAny>> {
        // Opened here, so a missing file raises in the app as with the asgi
        // worker; read and written from the runtime.
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        let (status, code, headers, trailers) = take_started(out);
        // A file's length is known: its trailers are taken and dropped.
        *out = after_body(None, trailers);
        self.sent.fetch_add(len, Ordering::Relaxed);
        self.respond(
            status,
            Reply::Opened {
                status: code,
                headers: ReplyFields::App(headers),
                file,
                len,
            },
        );
        Ok(done(py))
    }

    /// A body message after the first of a streamed body; the last one ends
    /// the stream.
    pub(super) fn stream_body(
        &self,
        py: Python<'_>,
        out: &mut Outbound,
        body: Bytes,
        more: bool,
    ) -> PyResult<Py<PyAny>> {
        let Outbound::Streaming { chunks, .. } = &*out else {
            unreachable!("stream_body while streaming only")
        };
        let tx = chunks.clone();
        let waits = if body.is_empty() {
            done(py)
        } else {
            self.push(py, &tx, body)?
        };
        if !more {
            // The stream ends when the last sender goes: this one, and
            // the one a waiting push holds once its chunk is queued.
            let Outbound::Streaming { trailers, .. } = std::mem::replace(out, Outbound::Complete)
            else {
                unreachable!()
            };
            let announced = trailers.is_some();
            *out = after_body(trailers, announced);
        }
        Ok(waits)
    }
}

/// What `http.response.start` said, taken out of `Started` for the first
/// body message (or the file): the status as sent and as hyper's code (the
/// message check took only 200 to 999, inside hyper's range: 500 is a guard),
/// the fields, and whether trailers were announced. `out` is left `Complete`
/// for the caller to set.
fn take_started(out: &mut Outbound) -> (u16, StatusCode, AppFields, bool) {
    let Outbound::Started {
        status,
        headers,
        trailers,
    } = std::mem::replace(out, Outbound::Complete)
    else {
        unreachable!("a body only after http.response.start")
    };
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, code, headers, trailers)
}

/// One `http.response.trailers` message: its fields join those before; the
/// last message hands them all over.
pub(super) fn add_trailers(out: &mut Outbound, part: HeaderMap, more: bool) {
    let Outbound::Trailers { tx, mut fields } = std::mem::replace(out, Outbound::Complete) else {
        unreachable!("add_trailers while gathering trailers only")
    };
    for (name, value) in &part {
        fields.append(name.clone(), value.clone());
    }
    if more {
        *out = Outbound::Trailers { tx, fields };
    } else if let Some(tx) = tx {
        let _ = tx.send(fields);
    }
}

/// A send that waited for room and found the client gone.
fn gone_while_waiting(py: Python<'_>, _: &'static str) -> PyErr {
    client_gone(py, "http.response.body")
}

/// The asgi worker's error for a send to a client that left (an OSError).
pub(super) fn client_gone(py: Python<'_>, kind: &str) -> PyErr {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let message = format!("the client went away ({kind} not sent)");
    match CLASS.import(py, "supervise.http.errors", "ClientDisconnected") {
        Ok(class) => PyErr::from_type(class.clone(), message),
        Err(e) => e,
    }
}
