//! One connection: hyper's HTTP/1.1 state machine, plus what hyper does not
//! do itself: the keep-alive idle timeout (hyper only has a header-read
//! timeout) and the graceful stop.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use super::exchange::ConnInfo;
use super::runtime::Shared;
use super::service;

/// On a graceful stop, how long a kept-alive connection must be quiet before
/// it is closed (IDLE_GRACE_ON_STOP of the Python workers).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(200);
/// hyper's floor for `max_buf_size`.
const MIN_BUF: usize = 8192;
/// What one connection may make us buffer for a head, whatever the limits say.
const MAX_HEAD: usize = 1024 * 1024;

pub fn builder(shared: &Shared) -> http1::Builder {
    let cfg = &shared.config;
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .keep_alive(cfg.keepalive.is_some())
        .header_read_timeout(cfg.header_timeout)
        .auto_date_header(cfg.date_header)
        // A client may shut its sending side once its request is out and still
        // wait for the answer (the conformance corpora do): serve it. The price:
        // a client that left is noticed when a write fails, not at its FIN.
        .half_close(true);
    let fields = if cfg.limit_request_fields == 0 {
        32768
    } else {
        cfg.limit_request_fields
    };
    b.max_headers(fields);
    // The whole head must fit the buffer: request line + every field at its
    // limit, so that the per-field limit (checked in limits.rs) answers first.
    let field = if cfg.limit_request_field_size == 0 {
        64 * 1024
    } else {
        cfg.limit_request_field_size
    };
    let line = if cfg.limit_request_line == 0 {
        8192
    } else {
        cfg.limit_request_line
    };
    b.max_buf_size((line + 2 + fields * field).clamp(MIN_BUF, MAX_HEAD));
    b
}

pub async fn serve<T>(
    stream: T,
    conn: ConnInfo,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = Arc::new(conn);
    let io = TokioIo::new(Counted {
        inner: stream,
        conn: conn.clone(),
    });
    let service = {
        let shared = shared.clone();
        let conn = conn.clone();
        service_fn(move |req| service::handle(req, shared.clone(), conn.clone()))
    };
    let connection = shared.http1.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    let mut tick = shared.config.keepalive.map(|k| k / 2);
    let mut idle_ticks = 0u32;
    let mut seen = conn.read_bytes.load(Ordering::Relaxed);
    let mut stopping = *stop.borrow();
    if stopping {
        tick = Some(STOP_GRACE / 2);
    }
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            _ = stop.changed(), if !stopping => {
                // Not graceful_shutdown() at once: a kept-alive connection that
                // looks idle may be carrying the client's next request already.
                // Busy connections end with their response (service.rs adds
                // `Connection: close`); idle ones after STOP_GRACE of quiet.
                stopping = true;
                tick = Some(STOP_GRACE / 2);
                idle_ticks = 0;
            }
            _ = sleep_or_never(tick) => {
                let read = conn.read_bytes.load(Ordering::Relaxed);
                if conn.busy.load(Ordering::Relaxed) == 0 && read == seen {
                    idle_ticks += 1;
                } else {
                    idle_ticks = 0;
                }
                seen = read;
                // Two quiet ticks of half the timeout: idle for 1 to 1.5 times it.
                if idle_ticks >= 2 {
                    connection.as_mut().graceful_shutdown();
                    tick = None;
                }
            }
        }
    }
}

async fn sleep_or_never(tick: Option<std::time::Duration>) {
    match tick {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

/// Counts bytes read, which is all the watchdog needs to see activity.
struct Counted<T> {
    inner: T,
    conn: Arc<ConnInfo>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            this.conn.read_bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
