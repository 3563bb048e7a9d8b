//! The byte side of the HTTP/1.1 loops that run without hyper (the WSGI
//! engine's, wsgi/direct_http1.rs, and the bridge's, direct_http1.rs): one read buffer,
//! heads through `h1::parse_request` (the Python workers' parser, so their
//! limits, statuses and strictness), the timeouts of the other workers, and
//! vectored writes so that a head and its body leave in one `writev`.
//!
//! Timeouts: a new connection's first request within `header_timeout` (then
//! `keepalive` between requests), each head complete within `header_timeout`
//! of its first byte (408). On a graceful stop a connection waiting for its
//! next request is closed once it has been quiet for the grace.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::{timeout, Instant, Sleep};

use super::config::ServerConfig;
use super::dispatch::BoxIo;
use super::exchange::ConnInfo;
use super::room::Seat;
use super::send_file::SendFile;
use super::shared::Shared;
use crate::http1_codec::{parse_request, ParseError, RequestHead};

const READ_SIZE: usize = 16 * 1024;
/// Bytes read ahead while a request is served (`watch_client`).
const READ_AHEAD: usize = 64 * 1024;
/// As the other workers' IDLE_GRACE_ON_STOP.
const STOP_GRACE: Duration = Duration::from_millis(1000);
/// How long a refused connection's unread input is drained before the close
/// (closing with unread input sends a reset, which can destroy the answer).
const LINGER: Duration = Duration::from_millis(1000);
/// At most this much per sendfile call, so that a huge file is sent in steps
/// the socket's readiness paces (the kernel caps one call near 2 GiB).
const SEND_FILE_STEP: u64 = 1 << 30;

/// What a request says about its response's framing.
#[derive(Clone, Copy)]
pub struct Target {
    pub http11: bool,
    /// The request allows keep-alive and the server keeps connections.
    pub keep_alive: bool,
    pub is_head: bool,
}

impl Target {
    pub fn of(head: &RequestHead, config: &ServerConfig) -> Self {
        Target {
            http11: head.version == crate::http1_codec::Version::Http11,
            keep_alive: head.keep_alive && config.keepalive.is_some(),
            is_head: head.method() == b"HEAD",
        }
    }
}

/// Why a connection ends before its request is served.
pub enum Stop {
    /// Quietly: the client left, idled out, or the worker is stopping.
    Close,
    /// With this answer, then a close.
    Refuse(u16, String),
}

pub struct Wire<I = BoxIo> {
    pub io: I,
    /// Read and not consumed yet: the head being parsed, body bytes, or
    /// pipelined requests.
    pub buf: BytesMut,
    /// Set once the client's end was read.
    pub eof: bool,
    /// Whether a request was begun on this connection.
    begun: bool,
    /// Its place under `--worker-connections` (room.rs): waiting while this
    /// loop waits for a head, busy from a complete head on.
    seat: Option<Arc<Seat>>,
    /// The waits between requests, kept for the connection's life.
    idle: IdleWait,
}

/// What a wait for the next request races: its deadline and the worker's
/// stop. Both are kept from one request to the next: a timer made per wait
/// was put in the runtime's wheel and taken out again, and a `changed()` made
/// per wait joined and left the stop's waiter list, four locks per request
/// (3% of a small request). The kept timer is only moved when it fires
/// before the wait's limit (`timer_by`).
struct IdleWait {
    timer: Option<Pin<Box<Sleep>>>,
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopping: bool,
}

impl IdleWait {
    fn new(mut stop: watch::Receiver<bool>) -> Self {
        let stopping = *stop.borrow_and_update();
        IdleWait {
            timer: None,
            // Resolves on the stop, or when the server that would send it is
            // gone: either way the worker is stopping.
            stop: Box::pin(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            }),
            stopping,
        }
    }
}

/// The kept timer, due no later than `at`. An earlier deadline is left as it
/// is: moving it on every request was 0.6% of a small one (perf), while the
/// wait it ends early only checks `at` and moves it then (`wait_for_request`),
/// once per keep-alive period of a busy connection.
fn timer_by(timer: &mut Option<Pin<Box<Sleep>>>, at: Instant) -> Pin<&mut Sleep> {
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
    if timer.deadline() > at {
        timer.as_mut().reset(at);
    }
    timer.as_mut()
}

impl<I: AsyncRead + AsyncWrite + Unpin + Send> Wire<I> {
    /// `stop`: the worker's graceful stop, which ends a wait between requests.
    pub fn new(io: I, conn: &ConnInfo, stop: watch::Receiver<bool>) -> Wire<I> {
        Wire {
            io,
            buf: BytesMut::with_capacity(READ_SIZE),
            eof: false,
            begun: false,
            seat: conn.seat.clone(),
            idle: IdleWait::new(stop),
        }
    }

    /// Waiting on the client from `now`; false once the seat went to a
    /// newer connection.
    fn seat_waits(&self, now: Instant, deadline: Option<Instant>) -> bool {
        self.seat
            .as_ref()
            .is_none_or(|seat| seat.wait(now, deadline))
    }

    /// False once the seat went to a newer connection.
    fn seat_busy(&self) -> bool {
        self.seat.as_ref().is_none_or(|seat| seat.busy())
    }

    /// The stream and what was read from it but not consumed, for whoever
    /// serves the connection next (hyper, after direct_http1.rs).
    pub fn into_parts(self) -> (I, Bytes) {
        (self.io, self.buf.freeze())
    }

    /// Reads more; false at the client's end.
    pub async fn fill(&mut self) -> io::Result<bool> {
        fill(&mut self.io, &mut self.buf, &mut self.eof).await
    }

    /// While the app has a request: reads what the client sends next (a
    /// pipelined request, kept for after this one) until it closes its side,
    /// which marks its seat as the first to give away (room.rs). Never
    /// resolves: it runs beside the wait for the reply. With READ_AHEAD bytes
    /// waiting it stops reading, so a pipelining client cannot grow the buffer.
    pub async fn watch_client(&mut self) {
        while !self.eof && self.buf.len() < READ_AHEAD {
            if !matches!(self.fill().await, Ok(true)) {
                self.eof = true;
                if let Some(seat) = &self.seat {
                    seat.leaving();
                }
            }
        }
        std::future::pending().await
    }

    /// Waits for the first byte of the next request: true once there is
    /// one. The first request gets `header_timeout`, the next ones `keepalive`.
    pub async fn next_request(&mut self, cfg: &ServerConfig) -> bool {
        let idle = if std::mem::replace(&mut self.begun, true) {
            cfg.keepalive
        } else {
            cfg.header_timeout.or(cfg.keepalive)
        };
        if !self.buf.is_empty() {
            return true; // pipelined: already here
        }
        if self.eof {
            return false;
        }
        let now = Instant::now();
        let limit = idle.map(|d| now + d);
        self.seat_waits(now, limit) && self.wait_for_request(limit).await
    }

    async fn wait_for_request(&mut self, mut limit: Option<Instant>) -> bool {
        let Wire {
            io, buf, eof, idle, ..
        } = self;
        let IdleWait {
            timer,
            stop,
            stopping,
        } = idle;
        loop {
            if *stopping {
                // A request may be on its way already: give it the grace.
                let grace = Instant::now() + STOP_GRACE;
                limit = Some(limit.map_or(grace, |l| l.min(grace)));
            }
            let due = limit.map(|at| timer_by(timer, at));
            let wait = async {
                match due {
                    Some(timer) => timer.await,
                    None => std::future::pending().await,
                }
            };
            // Biased: no random start per wait, and bytes that came win.
            tokio::select! {
                biased;
                read = fill(io, buf, eof) => return matches!(read, Ok(true)),
                _ = wait => {
                    match (limit, timer.as_mut()) {
                        // The kept timer was due before this wait's limit.
                        (Some(at), Some(timer)) if Instant::now() < at => timer.as_mut().reset(at),
                        _ => return false,
                    }
                }
                _ = stop.as_mut(), if !*stopping => *stopping = true,
            }
        }
    }

    /// A complete head within `header_timeout` of its first byte, and its
    /// size in `buf` (left there: the caller consumes it, or hands it on).
    /// From then on the connection is in a request, its seat busy.
    pub async fn read_head(&mut self, shared: &Shared) -> Result<(RequestHead, usize), Stop> {
        let cfg = &shared.config;
        let limits = cfg.limits();
        // The head's deadline, set at the first wait for more of it (from
        // then on the seat waits with it): a head that came whole
        // with its first read (nearly all) reads no clock and leaves its seat
        // as next_request set it until `seat_busy`.
        let mut waiting: Option<Option<Instant>> = None;
        loop {
            match parse_request(&self.buf, &limits) {
                Ok(Some(parsed)) if self.seat_busy() => return Ok(parsed),
                Ok(Some(_)) => return Err(Stop::Close), // its seat went to a newer connection
                Ok(None) => {}
                Err(ParseError { status, reason }) => {
                    return Err(Stop::Refuse(status, reason.to_string()))
                }
            }
            if self.eof {
                return Err(Stop::Close); // a head cut short: nobody to answer
            }
            let deadline = match waiting {
                Some(at) => at,
                None => {
                    let now = Instant::now();
                    let at = cfg.header_timeout.map(|d| now + d);
                    if !self.seat_waits(now, at) {
                        return Err(Stop::Close);
                    }
                    *waiting.insert(at)
                }
            };
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

    /// More body bytes within `idle`.
    pub async fn more(&mut self, idle: Option<Duration>) -> Result<(), Stop> {
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

    /// The parts in order, with as few `writev` calls as the socket allows
    /// (the slices live on the stack: this runs for every response).
    pub async fn write<const N: usize>(&mut self, parts: [&[u8]; N]) -> io::Result<()> {
        let mut slices = parts.map(IoSlice::new);
        let mut slices = &mut slices[..];
        // Leading empty parts go (nothing left to write must not look like a
        // zero-length write); empty ones between others are harmless.
        IoSlice::advance_slices(&mut slices, 0);
        while !slices.is_empty() {
            let n = self.io.write_vectored(slices).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut slices, n);
        }
        Ok(())
    }

    /// The server's own error answer (`error_bytes`); the connection ends
    /// after it.
    pub async fn refuse(&mut self, status: u16, reason: &str, body: bool) {
        let _ = self.io.write_all(&error_bytes(status, reason, body)).await;
    }

    /// The end: after a refusal or with input left unread, the client's
    /// sending side is drained for a while first, so that our close does not
    /// reset the connection under the answer.
    pub async fn close(&mut self, linger: bool) {
        let _ = self.io.flush().await;
        let _ = self.io.shutdown().await;
        if linger && !self.eof {
            // Into the read buffer, not an array on the stack: an array here
            // made every connection's future, moved and touched on every
            // request, 4 KiB larger.
            let _ = timeout(LINGER, async {
                loop {
                    self.buf.clear();
                    if !matches!(self.io.read_buf(&mut self.buf).await, Ok(n) if n > 0) {
                        break;
                    }
                }
            })
            .await;
        }
    }
}

impl<I: AsyncWrite + SendFile + Unpin> Wire<I> {
    /// Whether `send_file` works on this connection (not over TLS).
    pub fn sends_files(&self) -> bool {
        self.io.sends_files()
    }

    /// `head`, then `len` bytes of `file` from its position by sendfile(2):
    /// they go from the page cache to the socket without a copy through this
    /// process. The number of file bytes sent.
    pub async fn send_file(
        &mut self,
        mut head: &[u8],
        file: &std::fs::File,
        mut len: u64,
    ) -> io::Result<u64> {
        use std::os::fd::AsFd;
        while !head.is_empty() {
            let io = &mut self.io;
            let n = std::future::poll_fn(|cx| Pin::new(&mut *io).poll_send_more(cx, head)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            head = &head[n..];
        }
        let mut sent = 0;
        while len > 0 {
            let want = len.min(SEND_FILE_STEP) as usize;
            let io = &mut self.io;
            let n = std::future::poll_fn(|cx| {
                Pin::new(&mut *io).poll_send_file(cx, file.as_fd(), want)
            })
            .await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into()); // the file shrank
            }
            sent += n as u64;
            len -= n as u64;
        }
        Ok(sent)
    }
}

/// Reads more into `buf`; false at the client's end (then `eof` is set).
async fn fill<I: AsyncRead + Unpin>(
    io: &mut I,
    buf: &mut BytesMut,
    eof: &mut bool,
) -> io::Result<bool> {
    buf.reserve(READ_SIZE);
    let n = io.read_buf(buf).await?;
    if n == 0 {
        *eof = true;
    }
    Ok(n > 0)
}

/// The Python workers' error answer (http/errors.py `error_response`).
pub fn error_bytes(status: u16, text: &str, body: bool) -> Vec<u8> {
    let reason = crate::http1_codec::reason_phrase(status);
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
