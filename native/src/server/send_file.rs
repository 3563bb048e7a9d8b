//! Files from the page cache to the socket with `sendfile(2)`, for the
//! streams that can (plain TCP and unix sockets, under the server's
//! wrappers); TLS cannot, and its caller copies instead.
//!
//! Measured on the WSGI engine serving a 64 KiB `wsgi.file_wrapper` (one
//! worker pinned): reading into a buffer and writing it out was copies and a
//! memset in 11.5% of the samples, where bjoern's sendfile spent none.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::Interest;

/// A stream that may take a file's bytes without them passing through us.
pub trait SendFile {
    /// Whether `poll_send_file` works here (decided before the head is
    /// written, so that a stream that cannot keeps head and body together).
    fn sends_files(&self) -> bool {
        false
    }

    /// Up to `len` bytes of `file` from its current position (which moves
    /// on, as a read would); `Unsupported` from a stream that cannot, before
    /// it sent anything.
    fn poll_send_file(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _file: BorrowedFd<'_>,
        _len: usize,
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }

    /// Some of `buf`, held back (MSG_MORE) until the bytes that follow at
    /// once: a file's head then leaves with its first bytes, not alone in a
    /// segment that wakes the client for nothing.
    fn poll_send_more(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }
}

/// A non-blocking socket with tokio's readiness: sendfile until the socket
/// is full, then wait for room.
macro_rules! socket_send_file {
    ($stream:ty) => {
        impl SendFile for $stream {
            fn sends_files(&self) -> bool {
                true
            }

            fn poll_send_file(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                file: BorrowedFd<'_>,
                len: usize,
            ) -> Poll<io::Result<usize>> {
                let this = self.get_mut();
                let fd = this.as_raw_fd();
                when_writable(cx, this, || send_file(fd, file.as_raw_fd(), len))
            }

            fn poll_send_more(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let this = self.get_mut();
                let fd = this.as_raw_fd();
                when_writable(cx, this, || send_more(fd, buf))
            }
        }
    };
}

/// The readiness loop of tokio's own writes, around our system call.
trait Writable {
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

macro_rules! writable {
    ($stream:ty) => {
        impl Writable for $stream {
            fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                <$stream>::poll_write_ready(self, cx)
            }
            fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                <$stream>::try_io(self, interest, f)
            }
        }
    };
}

writable!(tokio::net::TcpStream);
writable!(tokio::net::UnixStream);

fn when_writable(
    cx: &mut Context<'_>,
    socket: &impl Writable,
    mut call: impl FnMut() -> io::Result<usize>,
) -> Poll<io::Result<usize>> {
    loop {
        ready!(socket.poll_write_ready(cx))?;
        match socket.try_io(Interest::WRITABLE, &mut call) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            done => return Poll::Ready(done),
        }
    }
}

socket_send_file!(tokio::net::TcpStream);
socket_send_file!(tokio::net::UnixStream);

/// A boxed stream (`BoxIo`) sends files as the stream inside does.
impl<T: SendFile + ?Sized> SendFile for Pin<Box<T>> {
    fn sends_files(&self) -> bool {
        (**self).sends_files()
    }

    fn poll_send_file(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        self.get_mut().as_mut().poll_send_file(cx, file, len)
    }

    fn poll_send_more(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().as_mut().poll_send_more(cx, buf)
    }
}

impl<S> SendFile for tokio_rustls::server::TlsStream<S> {}
impl SendFile for tokio::io::DuplexStream {}

fn send_more(socket: i32, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for its length during the call.
    let n = unsafe {
        libc::send(
            socket,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_MORE | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn send_file(socket: i32, file: i32, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are open for the call (the caller borrows
    // them); a null offset reads from, and advances, the file's position.
    let n = unsafe { libc::sendfile(socket, file, std::ptr::null_mut(), len) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
