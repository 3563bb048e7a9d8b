//! `--send-timeout` on a stream: a write (or flush, or file send) that has
//! found no room for that long fails with `TimedOut`, and whoever drives the
//! connection (hyper, direct_http1.rs, the WSGI engine's loop, a WebSocket
//! session) drops it as it drops any broken connection.
//!
//! Why a stall and not a deadline per response: a client on a slow link that
//! keeps taking bytes is served however long the body takes; one that stops
//! reading holds its connection, and what we buffered for it, for at most the
//! timeout (nginx's `send_timeout` works the same way). Any byte accepted
//! starts the wait again. Under it, `--send-min-rate` (send_pace.rs): over
//! each send timeout's worth of waits the client must take that many bytes a
//! second, or the write fails the same way.
//!
//! The timer is made the first time a write waits and reset on the next
//! stall, so a connection whose writes never wait costs one branch per write.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::exchange::ConnInfo;
use super::send_file::SendFile;
use super::send_pace::SendPace;
use std::sync::Arc;
use tokio::time::{Instant, Sleep};

/// The stall clock of one stream, and its `--send-min-rate` floor.
pub struct WriteStall {
    limit: Option<Duration>,
    min_rate: u64,
    timer: Option<Pin<Box<Sleep>>>,
    /// When the wait in progress began; `None`: no write is waiting.
    waiting_since: Option<Instant>,
    /// Made at the first wait, so a stream whose writes never wait counts
    /// nothing.
    pace: Option<SendPace>,
    /// Why it failed a write, once it has.
    gave_up: Option<&'static str>,
}

const TOOK_NOTHING: &str = "it took no bytes within send_timeout";
const TOO_SLOW: &str = "it took bytes slower than send_min_rate";

impl WriteStall {
    /// `limit`: `None` (or zero) waits for ever, as before the setting;
    /// `min_rate`: 0 sets no floor.
    pub fn new(limit: Option<Duration>, min_rate: u64) -> Self {
        WriteStall {
            limit: limit.filter(|d| !d.is_zero()),
            min_rate,
            timer: None,
            waiting_since: None,
            pace: None,
            gave_up: None,
        }
    }

    /// Why it gave up on the client, if it has.
    pub fn gave_up(&self) -> Option<&'static str> {
        self.gave_up
    }

    /// Passes a write's outcome on, counting what it wrote for the floor.
    pub fn watch_write(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        let res = self.watch(cx, res);
        if let (Some(pace), Poll::Ready(Ok(n))) = (self.pace.as_mut(), &res) {
            pace.took(*n);
        }
        res
    }

    /// Passes a write's outcome on: progress stops the clock, a wait starts
    /// it (or keeps it running), and a wait past the limit, or a client under
    /// the floor, becomes `TimedOut`.
    pub fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match res {
            Poll::Pending => self.waited(cx),
            ready => {
                if let Some(since) = self.waiting_since.take() {
                    if let Some(pace) = self.pace.as_mut() {
                        pace.wait_ended(since.elapsed());
                    }
                }
                ready
            }
        }
    }

    fn waited<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let Some(limit) = self.limit else {
            return Poll::Pending;
        };
        let since = match self.waiting_since {
            Some(since) => since,
            None => match self.start_wait(limit) {
                Some(since) => since,
                None => return self.give_up(TOO_SLOW),
            },
        };
        let timer = self.timer.as_mut().expect("set by start_wait");
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let waiting = since.elapsed();
        if waiting >= limit {
            return self.give_up(TOOK_NOTHING);
        }
        // The floor's window ended inside this wait.
        if self
            .pace
            .as_mut()
            .is_some_and(|pace| pace.too_slow(waiting))
        {
            return self.give_up(TOO_SLOW);
        }
        let timer = self.timer.as_mut().expect("set by start_wait");
        timer.as_mut().reset(since + limit);
        let _ = timer.as_mut().poll(cx);
        Poll::Pending
    }

    /// Starts the clock of a new wait; `None` when the waits before it left
    /// the client under the floor.
    fn start_wait(&mut self, limit: Duration) -> Option<Instant> {
        if self.pace.is_none() {
            self.pace = SendPace::new(Some(limit), self.min_rate);
        }
        let mut wake = limit;
        if let Some(pace) = self.pace.as_mut() {
            if pace.too_slow(Duration::ZERO) {
                return None;
            }
            wake = wake.min(pace.window_left(Duration::ZERO));
        }
        let now = Instant::now();
        match self.timer.as_mut() {
            Some(timer) => timer.as_mut().reset(now + wake),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(now + wake))),
        }
        self.waiting_since = Some(now);
        Some(now)
    }
}

impl WriteStall {
    fn give_up<T>(&mut self, why: &'static str) -> Poll<io::Result<T>> {
        self.gave_up = Some(why);
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)))
    }
}

/// A stream whose writes (and file sends) answer to a `WriteStall`: under
/// every connection (connection.rs's `Counted`), and around an HTTP/2 stream
/// carrying a WebSocket session, whose waits the connection does not see.
pub struct StallIo<T> {
    inner: T,
    stall: WriteStall,
    /// Told why, when the stall gives up on the client (logged once).
    report_to: Option<Arc<ConnInfo>>,
}

impl<T> StallIo<T> {
    pub fn new(inner: T, limit: Option<Duration>, min_rate: u64) -> Self {
        StallIo {
            inner,
            stall: WriteStall::new(limit, min_rate),
            report_to: None,
        }
    }

    pub fn reporting_to(mut self, conn: Arc<ConnInfo>) -> Self {
        self.report_to = Some(conn);
        self
    }

    fn passed<R>(&mut self, res: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if let (Poll::Ready(Err(_)), Some(why), Some(conn)) =
            (&res, self.stall.gave_up(), self.report_to.as_ref())
        {
            let _ = conn.gave_up.set(why);
        }
        res
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write(cx, buf);
        let res = this.stall.watch_write(cx, res);
        this.passed(res)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        let res = this.stall.watch_write(cx, res);
        this.passed(res)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        let res = this.stall.watch(cx, res);
        this.passed(res)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_shutdown(cx);
        let res = this.stall.watch(cx, res);
        this.passed(res)
    }
}

impl<T: SendFile + Unpin> SendFile for StallIo<T> {
    fn sends_files(&self) -> bool {
        self.inner.sends_files()
    }

    fn poll_send_file(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        file: std::os::fd::BorrowedFd<'_>,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_send_file(cx, file, len);
        let res = this.stall.watch_write(cx, res);
        this.passed(res)
    }

    fn poll_send_more(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_send_more(cx, buf);
        let res = this.stall.watch_write(cx, res);
        this.passed(res)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_the_limit_times_out() {
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)), 0);
        let mut cx = cx();
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(2)).await;
        match stall.watch::<usize>(&mut cx, Poll::Pending) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("expected TimedOut, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn progress_starts_the_wait_again() {
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)), 0);
        let mut cx = cx();
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(matches!(
            stall.watch(&mut cx, Poll::Ready(Ok(10usize))),
            Poll::Ready(Ok(10))
        ));
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_under_the_floor_times_out_at_the_end_of_the_window() {
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)), 100);
        let mut cx = cx();
        // A few bytes every 4 s keep the stall clock from firing, not the floor.
        for _ in 0..2 {
            assert!(stall.watch_write(&mut cx, Poll::Pending).is_pending());
            tokio::time::advance(Duration::from_secs(4)).await;
            assert!(stall.watch_write(&mut cx, Poll::Ready(Ok(10))).is_ready());
        }
        match stall.watch_write(&mut cx, Poll::Pending) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("expected TimedOut, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_floor_is_judged_inside_a_long_wait() {
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)), 100);
        let mut cx = cx();
        assert!(stall.watch_write(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(stall.watch_write(&mut cx, Poll::Ready(Ok(10))).is_ready());
        // 4 s waited: the window ends 1 s into the next wait.
        assert!(stall.watch_write(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert!(stall.watch_write(&mut cx, Poll::Pending).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_over_the_floor_is_served() {
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)), 100);
        let mut cx = cx();
        for _ in 0..10 {
            assert!(stall.watch_write(&mut cx, Poll::Pending).is_pending());
            tokio::time::advance(Duration::from_secs(4)).await;
            assert!(matches!(
                stall.watch_write(&mut cx, Poll::Ready(Ok(500))),
                Poll::Ready(Ok(500))
            ));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_limit_waits_for_ever() {
        let mut stall = WriteStall::new(None, 0);
        let mut cx = cx();
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
    }
}
