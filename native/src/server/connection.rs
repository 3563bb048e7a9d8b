//! One connection: its protocol (ALPN, `--http`, or the client's first bytes:
//! sniff.rs), then its loop: the WSGI engine's HTTP/1.1 (wsgi/direct_http1.rs), plain
//! HTTP/1.1 requests without hyper (direct_http1.rs), or hyper (HTTP/2, and
//! HTTP/1.1 after a hand-over), plus what hyper does not do itself: the idle timeout (hyper only has a header-read timeout, on
//! HTTP/1.1) and the graceful stop.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use super::answered::Dropped;
use super::config::HttpMode;
use super::exchange::ConnInfo;
use super::precheck_io::PrecheckIo;
use super::send_file::SendFile;
use super::service;
use super::shared::Shared;
use super::sniff::{sniff, Prefixed};
use super::write_stall::StallIo;

/// On a graceful stop, how long a kept-alive connection must be quiet before
/// it is closed (IDLE_GRACE_ON_STOP of the Python workers).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(1000);

/// Which protocol a connection speaks, as far as we know before reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// Read the first bytes: the HTTP/2 preface means HTTP/2, anything else
    /// HTTP/1.1 (sniff.rs).
    Sniff,
    H1,
    H2,
}

impl Proto {
    /// `h2`: what ALPN settled (`None` on cleartext or when the client offered nothing).
    pub fn pick(mode: HttpMode, h2: Option<bool>) -> Proto {
        match (mode, h2) {
            (HttpMode::H1, _) => Proto::H1,
            (HttpMode::H2, _) => Proto::H2,
            (HttpMode::Auto, Some(true)) => Proto::H2,
            (HttpMode::Auto, Some(false)) => Proto::H1,
            (HttpMode::Auto, None) => Proto::Sniff,
        }
    }
}

/// One connection, past its PROXY header and TLS handshake, in `proto`.
pub async fn serve<T>(
    stream: T,
    conn: ConnInfo,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    proto: Proto,
) where
    T: AsyncRead + AsyncWrite + SendFile + Unpin + Send + 'static,
{
    let conn = Arc::new(conn);
    let _log_drop = LogDrop(conn.clone(), shared.clone());
    let mut stream = Counted {
        inner: StallIo::new(
            stream,
            shared.config.send_timeout,
            shared.config.send_min_rate,
        )
        .reporting_to(conn.clone()),
        conn: conn.clone(),
    };
    let (h2, prefix) = match proto {
        Proto::H1 => (false, Bytes::new()),
        Proto::H2 => (true, Bytes::new()),
        Proto::Sniff => {
            let limit = shared.config.header_timeout.or(shared.config.keepalive);
            match sniff(&mut stream, &mut stop, limit, STOP_GRACE).await {
                Some(found) => found,
                None => return,
            }
        }
    };
    if h2 {
        conn.set_h2();
        // Its streams are not tracked one by one: an HTTP/2 connection keeps its seat.
        if !conn.seat_busy() {
            return;
        }
    } else if shared.dispatch.serves_h1() {
        // The WSGI engine's own HTTP/1.1 (wsgi/direct_http1.rs): `http1_codec` once, no hyper.
        let io: super::dispatch::BoxIo = Box::pin(Prefixed::new(prefix, stream));
        let served = shared.dispatch.serve_h1(io, conn, shared.clone(), stop);
        served.await;
        return;
    }
    let io = Prefixed::new(prefix, stream);
    if h2 {
        // Boxed, here and below: hyper's connection state is several KiB,
        // which every connection's task would carry inline.
        let io = Prefixed::new(Bytes::new(), io);
        return Box::pin(serve_hyper(io, conn, shared, stop, h2)).await;
    }
    // Plain requests without hyper (direct_http1.rs), until one needs it.
    let direct = super::direct_http1::serve(io, conn.clone(), shared.clone(), stop.clone());
    if let Some((io, read)) = direct.await {
        Box::pin(serve_hyper(
            Prefixed::new(read, io),
            conn,
            shared,
            stop,
            false,
        ))
        .await;
    }
}

/// hyper's side: HTTP/2, and HTTP/1.1 from wherever direct_http1.rs left it.
async fn serve_hyper<T>(
    io: T,
    conn: Arc<ConnInfo>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    h2: bool,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // HTTP/1.1 bytes reach hyper only once `http1_codec` has checked them (precheck_io.rs).
    let io = TokioIo::new(PrecheckIo::new(
        io,
        conn.clone(),
        shared.config.limits(),
        shared.config.header_timeout,
        !h2,
    ));
    let (for_service, conn_for_service) = (shared.clone(), conn.clone());
    if h2 {
        // Boxed: hyper spawns each stream as a task that holds the service's
        // future, moving it whole on the way (spawn, the task's cell), and
        // inline that future is a request's whole answer state.
        let service = service_fn(move |req| {
            Box::pin(service::handle(
                req,
                for_service.clone(),
                conn_for_service.clone(),
            ))
        });
        // Not `serve_connection_with_upgrades`: that one sniffs the version
        // again and would serve HTTP/1.1 on an HTTP/2-only listener.
        let connection = shared.http.h2.serve_connection(io, service);
        tokio::pin!(connection);
        watch_over(
            connection,
            |c| c.graceful_shutdown(),
            &conn,
            &shared,
            stop,
            true,
        )
        .await;
    } else {
        // HTTP/1.1's requests are served one after the other inside the
        // connection's own (boxed) future: nothing is spawned, so not boxed.
        let service = service_fn(move |req| {
            service::handle(req, for_service.clone(), conn_for_service.clone())
        });
        // With upgrades: a WebSocket handshake hands the connection to
        // ws_session.rs. Its version sniff only ever sees what `http1_codec` accepted.
        let connection = shared.http.h1.serve_connection_with_upgrades(io, service);
        tokio::pin!(connection);
        watch_over(
            connection,
            |c| c.graceful_shutdown(),
            &conn,
            &shared,
            stop,
            false,
        )
        .await;
    }
}

/// Drives the connection to its end, with the idle watchdog, HTTP/2's
/// stall watch and the graceful stop.
async fn watch_over<C: std::future::Future>(
    mut connection: Pin<&mut C>,
    shut_down: fn(Pin<&mut C>),
    conn: &ConnInfo,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
    h2: bool,
) {
    // HTTP/1.1 idles after `keepalive`; HTTP/2 too, and without keep-alive
    // after `header_timeout` (its requests share the connection, so closing
    // after each one, as HTTP/1.1 does then, would make no sense).
    let idle = if h2 {
        shared.config.keepalive.or(shared.config.header_timeout)
    } else {
        shared.config.keepalive
    };
    // HTTP/1.1's stalled writes fail in `Counted`; an HTTP/2 stream that
    // waits for window writes nothing at all, so it is watched here.
    let stall_tick = shared.config.send_timeout.filter(|_| h2).map(|t| t / 2);
    // Made once: the idle tick's sleep is made anew each turn of the loop,
    // which would start this one again each time.
    let mut stall_timer = Box::pin(tokio::time::sleep(stall_tick.unwrap_or_default()));
    let mut idle_ticks = 0u32;
    let mut seen = conn.activity();
    let mut stall = StallWatch::new(conn);
    let mut stopping = *stop.borrow();
    let mut closing = false;
    loop {
        let idle_tick = if closing {
            None
        } else if stopping {
            Some(STOP_GRACE / 2)
        } else {
            idle.map(|k| k / 2)
        };
        tokio::select! {
            _ = connection.as_mut() => break,
            _ = stop.changed(), if !stopping => {
                stopping = true;
                idle_ticks = 0;
                if h2 && !closing {
                    // GOAWAY at once: open streams finish, and h2's two-step
                    // GOAWAY still serves the ones already on their way.
                    shut_down(connection.as_mut());
                    closing = true;
                }
                // HTTP/1.1: not at once, since a kept-alive connection that
                // looks idle may be carrying the client's next request already.
                // Busy connections end with their response (service.rs adds
                // `Connection: close`); idle ones after STOP_GRACE of quiet.
            }
            _ = sleep_or_never(idle_tick) => {
                let now = conn.activity();
                if conn.busy.load(Ordering::Relaxed) == 0 && now == seen {
                    idle_ticks += 1;
                } else {
                    idle_ticks = 0;
                }
                seen = now;
                // Two quiet ticks of half the timeout: idle for 1 to 1.5 times it.
                if idle_ticks >= 2 {
                    shut_down(connection.as_mut());
                    closing = true;
                }
            }
            _ = stall_timer.as_mut(), if stall_tick.is_some() => {
                // Two ticks of half the timeout with chunks held and none let
                // go: the client has read nothing for 1 to 1.5 times it. What
                // hyper holds for it is dropped with the connection.
                if stall.stalled_twice(conn) {
                    let _ = conn.gave_up.set("it read nothing within send_timeout (HTTP/2 window)");
                    return;
                }
                let tick = stall_tick.unwrap_or_default();
                stall_timer.as_mut().reset(tokio::time::Instant::now() + tick);
            }
        }
    }
}

/// Logs, once the connection is over, why the server gave up on its client
/// (when it did).
struct LogDrop(Arc<ConnInfo>, Arc<Shared>);

impl Drop for LogDrop {
    fn drop(&mut self) {
        if let Some(why) = self.0.gave_up.get() {
            self.1.dropped.push(|| Dropped {
                client: self.0.client.clone(),
                why,
            });
        }
    }
}

/// HTTP/2 streams whose response waits for window, seen tick by tick.
struct StallWatch {
    let_go: u64,
    ticks: u32,
}

impl StallWatch {
    fn new(conn: &ConnInfo) -> Self {
        StallWatch {
            let_go: conn.chunks_let_go.load(Ordering::Relaxed),
            ticks: 0,
        }
    }

    fn stalled_twice(&mut self, conn: &ConnInfo) -> bool {
        let let_go = conn.chunks_let_go.load(Ordering::Relaxed);
        if conn.held_chunks.load(Ordering::Relaxed) > 0 && let_go == self.let_go {
            self.ticks += 1;
        } else {
            self.ticks = 0;
        }
        self.let_go = let_go;
        self.ticks >= 2
    }
}

async fn sleep_or_never(tick: Option<std::time::Duration>) {
    match tick {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

/// Counts bytes read, which is all the watchdog needs to see activity.
/// Every protocol on the connection writes through here, and so through
/// `StallIo`, which fails a write that waits past `--send-timeout`.
struct Counted<T> {
    inner: StallIo<T>,
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

impl<T: SendFile + Unpin> SendFile for Counted<T> {
    send_file_through!();
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    write_through!();

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
