//! HTTP/1.1 for WSGI on the engine, without hyper: the connection's bytes go
//! through `h1::parse_request` once (the Python workers' parser, so their
//! limits, statuses and strictness), the environ is filled from that head,
//! the response head is `h1::ResponseHeadBuilder`'s (the Python workers'
//! framing), and head and body leave in one write. hyper parsed every head a
//! second time, after strict_io.rs had, built a header map both ways and
//! wrote through its own buffers: half the time of a small request.
//!
//! The timeouts are the other workers': a new connection's first request
//! within `header_timeout` (then `keepalive` between requests), each head
//! complete within `header_timeout` of its first byte (408), each wait for
//! more body within `body_timeout` (408). On a graceful stop a response says
//! `Connection: close`, and a connection waiting for its next request is
//! closed once it has been quiet for the grace (IDLE_GRACE_ON_STOP).

use std::io::{self, IoSlice};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};

use super::dispatch::{Engine, Produced};
use super::h1_response::{frame, send_file, sent_of, stream, write_block, Target};
use super::spool::{RequestBody, Spool, SPOOL_AT};
use crate::h1::{parse_request, ChunkedDecoder, ParseError, RequestHead, Version};
use crate::server::{BoxIo, ConnInfo, Shared};

const READ_SIZE: usize = 16 * 1024;
/// As the other workers' IDLE_GRACE_ON_STOP.
const STOP_GRACE: Duration = Duration::from_millis(1000);
/// How long a refused connection's unread input is drained before the close
/// (closing with unread input sends a reset, which can destroy the answer).
const LINGER: Duration = Duration::from_millis(1000);
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Why a connection ends before its request is served.
enum Stop {
    /// Quietly: the client left, idled out, or the worker is stopping.
    Close,
    /// With this answer, then a close.
    Refuse(u16, String),
}

pub(super) struct Conn {
    io: BoxIo,
    /// The environ keys of this connection (`Engine::connection_environ`),
    /// made at its first request.
    environ: Option<Py<PyDict>>,
    buf: BytesMut,
    /// Set once the client's end was read.
    eof: bool,
}

pub(super) async fn serve(
    engine: Arc<Engine>,
    io: BoxIo,
    conn: Arc<ConnInfo>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let mut c = Conn {
        io,
        environ: None,
        buf: BytesMut::with_capacity(READ_SIZE),
        eof: false,
    };
    let cfg = &shared.config;
    let mut first = true;
    let linger = loop {
        let idle = if first {
            cfg.header_timeout.or(cfg.keepalive)
        } else {
            cfg.keepalive
        };
        first = false;
        if !c.wait_for_request(idle, &mut stop).await {
            break false;
        }
        let head = match c.read_head(&shared).await {
            Ok(head) => head,
            Err(Stop::Close) => break false,
            Err(Stop::Refuse(status, reason)) => {
                let _ = c.io.write_all(&error_bytes(status, &reason, true)).await;
                break true;
            }
        };
        let body = match c.read_body(&head, &shared, engine.body_timeout()).await {
            Ok(body) => body,
            Err(Stop::Close) => break false,
            Err(Stop::Refuse(status, reason)) => {
                let is_head = head.method() == b"HEAD";
                let _ =
                    c.io.write_all(&error_bytes(status, &reason, !is_head))
                        .await;
                break true;
            }
        };
        let ordinal = shared.counters.begin_request();
        let kept = answer(&engine, &mut c, head, &conn, body, &shared, ordinal).await;
        shared.counters.end_request();
        if !kept {
            break !c.buf.is_empty();
        }
    };
    c.close(linger).await;
    if let Some(environ) = c.environ.take() {
        Python::attach(|_| drop(environ));
    }
}

impl Conn {
    /// Reads more; false at the client's end.
    async fn fill(&mut self) -> io::Result<bool> {
        self.buf.reserve(READ_SIZE);
        let n = self.io.read_buf(&mut self.buf).await?;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Waits for the first byte of the next request: true once there is one.
    async fn wait_for_request(
        &mut self,
        idle: Option<Duration>,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        if self.eof {
            return false;
        }
        let mut limit = idle.map(|d| Instant::now() + d);
        let mut stopping = *stop.borrow();
        loop {
            if stopping {
                // A request may be on its way already: give it the grace.
                let grace = Instant::now() + STOP_GRACE;
                limit = Some(limit.map_or(grace, |l| l.min(grace)));
            }
            let wait = async {
                match limit {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                read = self.fill() => return matches!(read, Ok(true)),
                _ = wait => return false,
                _ = stop.changed(), if !stopping => stopping = true,
            }
        }
    }

    /// A complete head within `header_timeout` of its first byte.
    async fn read_head(&mut self, shared: &Shared) -> Result<RequestHead, Stop> {
        let cfg = &shared.config;
        let limits = cfg.limits();
        let deadline = cfg.header_timeout.map(|d| Instant::now() + d);
        loop {
            match parse_request(&self.buf, &limits) {
                Ok(Some((head, n))) => {
                    self.buf.advance(n);
                    return Ok(head);
                }
                Ok(None) => {}
                Err(ParseError { status, reason }) => {
                    return Err(Stop::Refuse(status, reason.to_string()))
                }
            }
            if self.eof {
                return Err(Stop::Close); // a head cut short: nobody to answer
            }
            let read = match deadline {
                None => self.fill().await,
                Some(at) => match tokio::time::timeout_at(at, self.fill()).await {
                    Ok(read) => read,
                    Err(_) => {
                        return Err(Stop::Refuse(
                            408,
                            "request head not complete within header_timeout".into(),
                        ))
                    }
                },
            };
            if read.is_err() {
                return Err(Stop::Close);
            }
        }
    }

    /// The whole body (the engine calls the app with it in hand); past
    /// `SPOOL_AT` it goes to a temporary file as it arrives.
    async fn read_body(
        &mut self,
        head: &RequestHead,
        shared: &Shared,
        idle: Option<Duration>,
    ) -> Result<RequestBody, Stop> {
        let limit = shared.config.limit_request_body;
        let length = head.content_length.unwrap_or(0);
        if !head.chunked && length == 0 {
            return Ok(RequestBody::empty());
        }
        if !head.chunked && limit != 0 && length > limit {
            return Err(Stop::Refuse(
                413,
                format!("Request body larger than {limit} bytes"),
            ));
        }
        if head.expect_continue && head.version == Version::Http11 {
            let _ = self.io.write_all(CONTINUE).await;
        }
        if !head.chunked && length <= SPOOL_AT as u64 {
            let length = length as usize;
            while self.buf.len() < length {
                self.more(idle).await?;
            }
            return Ok(RequestBody::Memory(self.buf.split_to(length).freeze()));
        }
        let mut spool = Spool::default();
        if !head.chunked {
            let mut left = length;
            loop {
                let n = left.min(self.buf.len() as u64) as usize;
                spool.push(&self.buf[..n]).map_err(not_stored)?;
                self.buf.advance(n);
                left -= n as u64;
                if left == 0 {
                    return Ok(spool.finish());
                }
                self.more(idle).await?;
            }
        }
        let mut decoder = ChunkedDecoder::new(limit);
        let mut payload = Vec::new();
        loop {
            if !self.buf.is_empty() {
                let data = self.buf.split();
                if let Err(e) = decoder.feed(&data, &mut payload) {
                    return Err(Stop::Refuse(e.status, e.reason.to_string()));
                }
                spool.push(&payload).map_err(not_stored)?;
                payload.clear();
                if decoder.done() {
                    // What came after the body is the next request.
                    self.buf.extend_from_slice(decoder.leftover());
                    return Ok(spool.finish());
                }
            }
            self.more(idle).await?;
        }
    }

    /// More body bytes within `idle`.
    async fn more(&mut self, idle: Option<Duration>) -> Result<(), Stop> {
        if self.eof {
            return Err(Stop::Close);
        }
        let read = match idle {
            None => self.fill().await,
            Some(d) => match timeout(d, self.fill()).await {
                Ok(read) => read,
                Err(_) => return Err(Stop::Refuse(408, "request body timed out".into())),
            },
        };
        match read {
            Ok(true) => Ok(()),
            _ => Err(Stop::Close),
        }
    }

    pub(super) async fn write(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let mut slices: Vec<IoSlice<'_>> = parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| IoSlice::new(p))
            .collect();
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            let n = self.io.write_vectored(slices).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut slices, n);
        }
        Ok(())
    }

    /// The end: after a refusal or with input left unread, the client's
    /// sending side is drained for a while first, so that our close does not
    /// reset the connection under the answer.
    async fn close(&mut self, linger: bool) {
        let _ = self.io.flush().await;
        let _ = self.io.shutdown().await;
        if linger && !self.eof {
            let _ = timeout(LINGER, async {
                let mut sink = [0u8; 4096];
                while matches!(self.io.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
    }
}

/// Runs the app and writes its response; true when the connection may carry
/// another request.
async fn answer(
    engine: &Arc<Engine>,
    c: &mut Conn,
    head: RequestHead,
    conn: &ConnInfo,
    body: RequestBody,
    shared: &Shared,
    ordinal: u64,
) -> bool {
    let is_head = head.method() == b"HEAD";
    let http11 = head.version == Version::Http11;
    let keep = head.keep_alive && shared.config.keepalive.is_some();
    // One GIL hold for a whole response: the environ, the app, the head,
    // the access log, and dropping the request's Python objects.
    let (call, produced, framed) = {
        let _busy = engine.clock.enter();
        Python::attach(|py| {
            let environ = match &c.environ {
                Some(base) => Ok(base.bind(py).clone()),
                None => engine.connection_environ(py, conn),
            }
            .and_then(|base| {
                let environ = engine.environ(&base, &head, body);
                c.environ.get_or_insert_with(|| base.unbind());
                environ
            });
            let (call, produced) = engine.run(py, environ);
            let keep = keep && !shared.closes_after(ordinal);
            let (known, file) = match &produced {
                Produced::Whole(b) => (Some(b.len() as u64), false),
                Produced::File(_, len) => (Some(*len), true),
                _ => (None, false),
            };
            let framed = match (&call, &produced) {
                (_, Produced::Error | Produced::BadProxy) | (None, _) => None,
                (Some(call), _) => {
                    let target = Target {
                        http11,
                        keep_alive: keep,
                        is_head,
                    };
                    frame(py, engine, call, target, known, file)
                }
            };
            match (&call, &produced, &framed) {
                (Some(c), Produced::Whole(body), Some(f)) => {
                    let status = c.start.borrow(py).code;
                    engine.done(py, c, status, sent_of(f, body.len()) as u64);
                    (None, produced, framed)
                }
                (Some(c), _, None) => {
                    engine.done(py, c, 500, 0);
                    (None, produced, None)
                }
                _ => (call, produced, framed),
            }
        })
    };
    let Some(framed) = framed else {
        let (status, text) = match produced {
            Produced::BadProxy => (400, "Contradictory scheme headers"),
            _ => (500, ""),
        };
        let _ = c.io.write_all(&error_bytes(status, text, !is_head)).await;
        return false;
    };
    let kept = match produced {
        Produced::Whole(body) => {
            let n = sent_of(&framed, body.len());
            let ok = c.write(&[&framed.head, &body[..n]]).await.is_ok();
            ok && framed.keep_alive && (framed.length < 0 || n as i64 == framed.length)
        }
        Produced::File(file, len) => {
            let call = call.expect("a file answer has a call");
            let sent = send_file(c, &framed, file, len).await;
            let ok = sent.is_ok();
            let sent = sent.unwrap_or(0);
            Python::attach(|py| {
                let status = call.start.borrow(py).code;
                engine.done(py, &call, status, sent);
                drop(call);
            });
            ok && framed.keep_alive
        }
        Produced::Stream(pump, first) => {
            let call = call.expect("a streamed answer has a call");
            stream(engine, c, &framed, call, pump, first).await
        }
        Produced::Cut(written) => {
            let call = call.expect("a cut answer has a call");
            let _ = c.write(&[&framed.head]).await;
            let mut sent = 0;
            for block in &written {
                if write_block(c, &framed, block).await.is_err() {
                    break;
                }
                sent += block.len() as u64;
            }
            Python::attach(|py| {
                let status = call.start.borrow(py).code;
                engine.done(py, &call, status, sent);
                drop(call);
            });
            false
        }
        Produced::Error | Produced::BadProxy => false,
    };
    kept
}

/// The body could not go to its temporary file (a full disk, TMPDIR gone).
fn not_stored(e: io::Error) -> Stop {
    Stop::Refuse(500, format!("Request body could not be stored: {e}"))
}

/// The Python workers' error answer (http/errors.py `error_response`).
fn error_bytes(status: u16, text: &str, body: bool) -> Vec<u8> {
    let reason = crate::h1::reason_phrase(status);
    let message = if !text.is_empty() && text != reason {
        format!("{status} {reason}\n{text}\n")
    } else {
        format!("{status} {reason}\n")
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        message.len()
    )
    .into_bytes();
    if body {
        out.extend_from_slice(message.as_bytes());
    }
    out
}
