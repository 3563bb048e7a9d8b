//! Response bodies: one enum for every way a body is framed, so hyper learns
//! the length (Content-Length) from `size_hint` whenever it is known and
//! chunks only what is streamed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};
use hyper::HeaderMap;
use tokio::sync::{mpsc, oneshot};

use std::sync::atomic::Ordering;

use super::counters::Counters;
use super::exchange::{ConnInfo, Tracker};

const FILE_CHUNK: usize = 256 * 1024;

pub enum Framing {
    Empty,
    Full(Option<Bytes>),
    /// Read on the runtime thread with plain reads, not tokio::fs: a regular
    /// file's read comes from the page cache, and tokio::fs sent each one to
    /// its blocking pool and back (two thread hops a read: 0.74x Granian on
    /// 64 KiB files). A read that must go to a slow disk holds the thread.
    File {
        file: std::fs::File,
        remaining: u64,
    },
    /// Chunked on HTTP/1.1; the app's `send_bytes` feeds it.
    Stream {
        chunks: mpsc::Receiver<Bytes>,
        /// Sent after the last chunk (hyper writes them on HTTP/2, and on
        /// HTTP/1.1 only as its rules allow: `TE: trailers` in the request
        /// and the names in the response's `Trailer` field).
        trailers: Option<oneshot::Receiver<HeaderMap>>,
        tracker: Arc<Tracker>,
        /// Set once an aborted stream has let hyper flush what came before.
        flushed: bool,
    },
}

/// Marks the exchange over when hyper drops the body: written, or the
/// connection closed under it.
pub struct ExchangeGuard {
    tracker: Arc<Tracker>,
    counters: Arc<Counters>,
    conn: Arc<ConnInfo>,
    /// The request's number in the worker (`Counters::begin_request`).
    pub ordinal: u64,
    /// Its `--backpressure` permit, once it has one.
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl ExchangeGuard {
    pub fn new(tracker: Arc<Tracker>, counters: Arc<Counters>, conn: Arc<ConnInfo>) -> Self {
        let ordinal = counters.begin_request();
        conn.busy.fetch_add(1, Ordering::Relaxed);
        ExchangeGuard {
            tracker,
            counters,
            conn,
            ordinal,
            permit: None,
        }
    }

    /// Holds the request's `--backpressure` permit until the exchange ends
    /// (gate.rs).
    pub fn admit(&mut self, permit: Option<tokio::sync::OwnedSemaphorePermit>) {
        self.permit = permit;
    }
}

impl Drop for ExchangeGuard {
    fn drop(&mut self) {
        self.conn.busy.fetch_sub(1, Ordering::Relaxed);
        self.counters.end_request();
        self.tracker.finish();
    }
}

pub struct ResponseBody {
    framing: Framing,
    _guard: Option<ExchangeGuard>,
    /// HTTP/2: the last chunk handed to hyper is counted in the
    /// connection's `held_chunks` until hyper asks past it (it asks for the
    /// next one only once the stream had window for this one).
    holding: bool,
}

impl ResponseBody {
    pub fn new(framing: Framing, guard: Option<ExchangeGuard>) -> Self {
        ResponseBody {
            framing,
            _guard: guard,
            holding: false,
        }
    }

    /// The same exchange with no content (a 2xx to CONNECT, RFC 9110 9.3.6).
    pub fn without_content(mut self) -> Self {
        self.framing = Framing::Empty;
        self
    }

    pub fn full(body: impl Into<Bytes>) -> Self {
        Self::new(Framing::Full(Some(body.into())), None)
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        this.release_chunk();
        let frame = this.next_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &frame {
            if f.is_data() {
                this.hold_chunk();
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.framing.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.framing.size_hint()
    }
}

impl ResponseBody {
    fn hold_chunk(&mut self) {
        if let Some(guard) = &self._guard {
            if guard.conn.is_h2() {
                guard.conn.held_chunks.fetch_add(1, Ordering::Relaxed);
                self.holding = true;
            }
        }
    }

    fn release_chunk(&mut self) {
        if std::mem::take(&mut self.holding) {
            if let Some(guard) = &self._guard {
                guard.conn.held_chunks.fetch_sub(1, Ordering::Relaxed);
                guard.conn.chunks_let_go.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn next_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match &mut self.framing {
            Framing::Empty => Poll::Ready(None),
            Framing::Full(body) => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
            Framing::File { file, remaining } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                let want = (*remaining).min(FILE_CHUNK as u64) as usize;
                let mut buf = BytesMut::zeroed(want);
                match std::io::Read::read(file, &mut buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                    Err(e) => Poll::Ready(Some(Err(e))),
                    // The file shrank under us: the promised length cannot be kept.
                    Ok(0) => Poll::Ready(Some(Err(io::ErrorKind::UnexpectedEof.into()))),
                    Ok(n) => {
                        buf.truncate(n);
                        *remaining -= n as u64;
                        Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
                    }
                }
            }
            Framing::Stream {
                chunks,
                trailers,
                tracker,
                flushed,
            } => match chunks.poll_recv(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(b)) => Poll::Ready(Some(Ok(Frame::data(b)))),
                Poll::Ready(None) if trailers.is_some() && !tracker.is_aborted() => {
                    let waiting = trailers.as_mut().expect("checked");
                    match Pin::new(waiting).poll(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(Ok(fields)) => {
                            *trailers = None;
                            Poll::Ready(Some(Ok(Frame::trailers(fields))))
                        }
                        // Gone without its trailers: the app failed after
                        // the body (and aborted the stream first).
                        Poll::Ready(Err(_)) => {
                            *trailers = None;
                            tracker.abort();
                            cx.waker().wake_by_ref();
                            Poll::Pending
                        }
                    }
                }
                // hyper writes out what it buffered when the body is pending,
                // but drops it on an error: pend once, so the client gets
                // everything the app sent before it failed.
                Poll::Ready(None) if tracker.is_aborted() && !*flushed => {
                    *flushed = true;
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                // A stream the app abandoned by raising must not look complete.
                Poll::Ready(None) if tracker.is_aborted() => Poll::Ready(Some(Err(
                    io::Error::other("response stream aborted by the application"),
                ))),
                Poll::Ready(None) => Poll::Ready(None),
            },
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        self.release_chunk();
    }
}

impl Framing {
    fn is_end_stream(&self) -> bool {
        match self {
            Framing::Empty => true,
            Framing::Full(b) => b.is_none(),
            Framing::File { remaining, .. } => *remaining == 0,
            Framing::Stream { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Framing::Empty => SizeHint::with_exact(0),
            Framing::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Framing::File { remaining, .. } => SizeHint::with_exact(*remaining),
            Framing::Stream { .. } => SizeHint::default(),
        }
    }
}

/// A short text answer from the server itself (limits, errors).
pub fn plain(
    status: hyper::StatusCode,
    text: &'static str,
    close: bool,
) -> hyper::Response<ResponseBody> {
    let headers = super::reply::text_headers(close);
    let mut response = hyper::Response::new(ResponseBody::full(text));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
