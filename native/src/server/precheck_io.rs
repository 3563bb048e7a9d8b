//! HTTP/1.1 bytes checked by `http1_codec` before hyper reads them.
//!
//! hyper (httparse) is more lenient than the parser every Python worker uses:
//! it accepts bare LF line ends, merges repeated Content-Length fields, drops
//! a Content-Length next to chunked, and reads a few chunk-size forms `http1_codec`
//! refuses. Checking hyper's parsed heads afterwards (hyper_head_rules.rs) cannot see
//! any of that, so this wrapper sits between the socket and hyper and lets
//! through only what `http1_codec` accepted: each request head is parsed by
//! `h1::parse_request` on the raw bytes, and its body is followed by its
//! framing (a length, or `http1_codec`'s chunked decoder) to find the next head.
//!
//! A head `http1_codec` refuses never reaches hyper: hyper sees the end of the stream
//! after the requests before it, answers those (pipelining keeps its order),
//! and when it shuts the connection down the refusal (400, 414, 431, 501,
//! 505, with `Connection: close`) is written first. A head not complete
//! within `header_timeout` of its first byte is answered 408 the same way.
//! A chunked body `http1_codec` refuses is cut where it goes wrong: hyper sees the
//! stream end inside the body, the connection is marked so that the body
//! reader answers 400 (unless the app answered already) and the app's read
//! fails; no second request behind it is ever read.
//!
//! HTTP/2 connections (chosen before, by `--http`, ALPN or sniff.rs) and the
//! bytes after an upgrade request (WebSocket, CONNECT) pass unchecked: they
//! are not HTTP/1.1 messages.
//!
//! Cost: one copy of the bytes (socket to our buffer to hyper's) and one `http1_codec`
//! head parse per request, on the tokio thread.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Sleep};

use super::exchange::ConnInfo;
use crate::http1_codec::{parse_request, ChunkedDecoder, Limits, ParseError, RequestHead};

const READ_SIZE: usize = 16 * 1024;
/// What a client may send behind a request that asked to upgrade before the
/// app has answered it.
const MAX_HELD: usize = 64 * 1024;
const HEAD_TIMEOUT: ParseError =
    ParseError::new(408, "request head not complete within header_timeout");

/// Where the next unchecked byte belongs.
enum Framing {
    /// The start of a request head.
    Head,
    /// So many body bytes left.
    Length(u64),
    /// Inside a chunked body.
    Chunked(Box<ChunkedDecoder>),
    /// The request with this number asked to upgrade: what follows it waits
    /// until the service says whether it was upgraded (upgrade_gate.rs).
    AwaitUpgrade(u64),
    /// Not HTTP/1.1 (HTTP/2, or after an upgrade or CONNECT): no checks.
    Opaque,
    /// A head was refused: hyper reads the end of the stream; the answer is
    /// written when hyper shuts the connection down.
    Refused(ParseError),
    /// A body was refused, or a response was owed and written: nothing more.
    Ended,
}

pub struct PrecheckIo<T> {
    inner: T,
    conn: Arc<ConnInfo>,
    limits: Limits,
    header_timeout: Option<Duration>,
    framing: Framing,
    /// Bytes read from the socket: `buf[..checked]` may go to hyper.
    buf: Vec<u8>,
    checked: usize,
    /// Set while part of a head is waiting: when it must be complete.
    head_deadline: Option<Pin<Box<Sleep>>>,
    /// The refusal being written at shutdown, and how much of it went out.
    refusal: Option<(Vec<u8>, usize)>,
    /// Heads passed to hyper so far: the number of the latest request.
    heads: u64,
    /// Set from a head that asked to upgrade until its body has passed.
    asked_upgrade: bool,
    /// The client's end was read (the bytes before it may still be held).
    eof: bool,
}

impl<T> PrecheckIo<T> {
    /// `http1`: false for an HTTP/2 connection, whose bytes pass as they are.
    pub fn new(
        inner: T,
        conn: Arc<ConnInfo>,
        limits: Limits,
        header_timeout: Option<Duration>,
        http1: bool,
    ) -> Self {
        PrecheckIo {
            inner,
            conn,
            limits,
            header_timeout,
            framing: if http1 {
                Framing::Head
            } else {
                Framing::Opaque
            },
            buf: Vec::new(),
            checked: 0,
            head_deadline: None,
            refusal: None,
            heads: 0,
            asked_upgrade: false,
            eof: false,
        }
    }

    /// Moves the boundary between checked and unchecked bytes as far as the
    /// bytes received allow.
    fn check(&mut self) {
        loop {
            let pending = &self.buf[self.checked..];
            if pending.is_empty() {
                return;
            }
            match &mut self.framing {
                Framing::Head => match parse_request(pending, &self.limits) {
                    Ok(None) => return,
                    Ok(Some((head, n))) => {
                        self.checked += n;
                        self.heads += 1;
                        self.head_deadline = None;
                        self.asked_upgrade = head.asks_upgrade();
                        match body_framing(&head) {
                            Some(body) => self.framing = body,
                            None => self.body_done(),
                        }
                    }
                    Err(e) => {
                        self.refuse(e);
                        return;
                    }
                },
                Framing::Length(left) => {
                    let n = (*left).min(pending.len() as u64);
                    self.checked += n as usize;
                    *left -= n;
                    if *left == 0 {
                        self.body_done();
                    }
                }
                Framing::Chunked(decoder) => {
                    let mut payload = Vec::new();
                    if decoder.feed(pending, &mut payload).is_err() {
                        // Cut here: hyper sees the stream end inside the body.
                        self.conn.refuse_body();
                        self.buf.truncate(self.checked);
                        self.framing = Framing::Ended;
                        return;
                    }
                    if decoder.done() {
                        let after = decoder.leftover().len();
                        self.checked += pending.len() - after;
                        self.body_done();
                    } else {
                        self.checked += pending.len();
                    }
                }
                // Held until poll_read learns the outcome.
                Framing::AwaitUpgrade(_) => return,
                Framing::Opaque => {
                    self.checked = self.buf.len();
                    return;
                }
                Framing::Refused(_) | Framing::Ended => {
                    self.buf.truncate(self.checked);
                    return;
                }
            }
        }
    }

    /// A request ended: the next one begins, unless it asked to upgrade.
    fn body_done(&mut self) {
        self.framing = if std::mem::take(&mut self.asked_upgrade) {
            Framing::AwaitUpgrade(self.heads)
        } else {
            Framing::Head
        };
    }

    /// After a request that asked to upgrade: `Ready(true)` when the outcome
    /// just arrived and the framing changed, `Ready(false)` when reading on is
    /// fine, `Pending` to wait. Bounded: a client that keeps sending while
    /// the app decides is not read further.
    fn settle_upgrade(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        let Framing::AwaitUpgrade(index) = self.framing else {
            return Poll::Ready(false);
        };
        match self.conn.upgrade.poll_outcome(index, cx) {
            Poll::Ready(upgraded) => {
                self.framing = if upgraded {
                    Framing::Opaque
                } else {
                    Framing::Head
                };
                self.check();
                self.arm_head_deadline();
                Poll::Ready(true)
            }
            Poll::Pending if self.buf.len() - self.checked >= MAX_HELD => Poll::Pending,
            Poll::Pending => Poll::Ready(false),
        }
    }

    fn refuse(&mut self, error: ParseError) {
        self.buf.truncate(self.checked);
        self.head_deadline = None;
        self.framing = Framing::Refused(error);
    }

    /// Starts the head deadline when a head's first byte is waiting.
    fn arm_head_deadline(&mut self) {
        let waiting = matches!(self.framing, Framing::Head) && self.checked < self.buf.len();
        if !waiting {
            self.head_deadline = None;
        } else if self.head_deadline.is_none() {
            if let Some(t) = self.header_timeout {
                self.head_deadline = Some(Box::pin(sleep(t)));
            }
        }
    }

    /// Hands checked bytes to hyper; true if any were.
    fn give(&mut self, out: &mut ReadBuf<'_>) -> bool {
        if self.checked == 0 {
            return false;
        }
        let n = self.checked.min(out.remaining());
        out.put_slice(&self.buf[..n]);
        self.buf.drain(..n);
        self.checked -= n;
        true
    }
}

/// How the body after `head` is framed; `None` when it has none.
fn body_framing(head: &RequestHead) -> Option<Framing> {
    if head.chunked {
        return Some(Framing::Chunked(Box::new(ChunkedDecoder::new(0))));
    }
    match head.content_length {
        Some(n) if n > 0 => Some(Framing::Length(n)),
        _ => None,
    }
}

/// The whole answer to a refused head.
fn refusal_bytes(e: &ParseError) -> Vec<u8> {
    let body = format!("{}\n", e.reason);
    format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        e.status,
        crate::http1_codec::reason_phrase(e.status),
        body.len(),
        body
    )
    .into_bytes()
}

impl<T: AsyncRead + Unpin> AsyncRead for PrecheckIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.give(out) {
                return Poll::Ready(Ok(()));
            }
            match this.framing {
                Framing::Refused(_) | Framing::Ended => return Poll::Ready(Ok(())),
                Framing::Opaque if this.buf.is_empty() => {
                    // Nothing of ours left: no copy any more.
                    return Pin::new(&mut this.inner).poll_read(cx, out);
                }
                _ => {}
            }
            match this.settle_upgrade(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(true) => continue,
                Poll::Ready(false) => {}
            }
            if let Some(deadline) = this.head_deadline.as_mut() {
                if deadline.as_mut().poll(cx).is_ready() {
                    this.refuse(HEAD_TIMEOUT);
                    continue;
                }
            }
            if this.eof {
                if matches!(this.framing, Framing::AwaitUpgrade(_)) {
                    // The held bytes are judged once the outcome is known.
                    return Poll::Pending;
                }
                // The client's end: a head begun but not finished is dropped
                // (as the other workers do); hyper sees the end after the
                // complete requests.
                this.buf.truncate(this.checked);
                this.framing = Framing::Ended;
                continue;
            }
            let start = this.buf.len();
            // Into the spare capacity, not a zeroed tail: most polls of a
            // kept-alive connection read nothing, and zeroing READ_SIZE bytes
            // for each was 4% of a small request's time.
            this.buf.reserve(READ_SIZE);
            let mut read = ReadBuf::uninit(&mut this.buf.spare_capacity_mut()[..READ_SIZE]);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let n = read.filled().len();
            // SAFETY: the reader initialised the first `n` bytes of the spare
            // capacity (ReadBuf only counts what was filled).
            unsafe { this.buf.set_len(start + n) };
            ready!(polled)?;
            if n == 0 {
                this.eof = true;
                continue;
            }
            this.check();
            this.arm_head_deadline();
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for PrecheckIo<T> {
    write_through!();

    /// hyper is done with the connection: a refusal still owed goes out first.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Framing::Refused(e) = &this.framing {
            this.refusal = Some((refusal_bytes(e), 0));
            this.framing = Framing::Ended;
        }
        if let Some((bytes, sent)) = &mut this.refusal {
            while *sent < bytes.len() {
                let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &bytes[*sent..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *sent += n;
            }
            ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
            this.refusal = None;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "precheck_io_tests.rs"]
mod tests;
