//! `--send-timeout` on a stream: a write (or flush, or file send) that has
//! found no room for that long fails with `TimedOut`, and whoever drives the
//! connection (hyper, direct_http1.rs, the WSGI engine's loop, a WebSocket
//! session) drops it as it drops any broken connection.
//!
//! Why a stall and not a deadline per response: a client on a slow link that
//! keeps taking bytes is served however long the body takes; one that stops
//! reading holds its connection, and what we buffered for it, for at most the
//! timeout (nginx's `send_timeout` works the same way). Any byte accepted
//! starts the wait again.
//!
//! The timer is made the first time a write waits and reset on the next
//! stall, so a connection whose writes never wait costs one branch per write.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::send_file::SendFile;
use tokio::time::{Instant, Sleep};

/// The stall clock of one stream.
pub struct WriteStall {
    limit: Option<Duration>,
    timer: Option<Pin<Box<Sleep>>>,
    /// A write is waiting and the timer runs for it.
    armed: bool,
}

impl WriteStall {
    /// `limit`: `None` (or zero) waits for ever, as before the setting.
    pub fn new(limit: Option<Duration>) -> Self {
        WriteStall {
            limit: limit.filter(|d| !d.is_zero()),
            timer: None,
            armed: false,
        }
    }

    /// Passes a write's outcome on: progress stops the clock, a wait starts
    /// it (or keeps it running), and a wait past the limit becomes
    /// `TimedOut`.
    pub fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match res {
            Poll::Pending => self.waited(cx),
            ready => {
                self.armed = false;
                ready
            }
        }
    }

    fn waited<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let Some(limit) = self.limit else {
            return Poll::Pending;
        };
        if !self.armed {
            self.armed = true;
            let at = Instant::now() + limit;
            match self.timer.as_mut() {
                Some(timer) => timer.as_mut().reset(at),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
            }
        }
        let timer = self.timer.as_mut().expect("armed above");
        match timer.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took no response bytes within send_timeout",
            ))),
        }
    }
}

/// A stream whose writes (and file sends) answer to a `WriteStall`: under
/// every connection (connection.rs's `Counted`), and around an HTTP/2 stream
/// carrying a WebSocket session, whose waits the connection does not see.
pub struct StallIo<T> {
    inner: T,
    stall: WriteStall,
}

impl<T> StallIo<T> {
    pub fn new(inner: T, limit: Option<Duration>) -> Self {
        StallIo {
            inner,
            stall: WriteStall::new(limit),
        }
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
        this.stall.watch(cx, res)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.stall.watch(cx, res)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        this.stall.watch(cx, res)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.stall.watch(cx, res)
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
        this.stall.watch(cx, res)
    }

    fn poll_send_more(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_send_more(cx, buf);
        this.stall.watch(cx, res)
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
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)));
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
        let mut stall = WriteStall::new(Some(Duration::from_secs(5)));
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
    async fn no_limit_waits_for_ever() {
        let mut stall = WriteStall::new(None);
        let mut cx = cx();
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(stall.watch::<usize>(&mut cx, Poll::Pending).is_pending());
    }
}
