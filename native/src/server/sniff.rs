//! `--http auto` without ALPN: HTTP/2 when the client opens with the HTTP/2
//! preface (h2c with prior knowledge), HTTP/1.1 otherwise.
//!
//! Not hyper-util's auto builder, which reads exactly 24 bytes to decide:
//! that splits every HTTP/1.1 head into two reads, and hyper, once a head
//! came in partial, only looks at it again when a blank line arrives, so a
//! malformed head (a bare CR, say) waited for the header timeout instead of
//! getting its 400. Here the first read is as large as hyper's own, and what
//! it brought is handed to hyper whole.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

use super::send_file::SendFile;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// hyper's first read is this large too.
const FIRST_READ: usize = 8192;

/// What the first bytes say: `Some(true)` HTTP/2, `Some(false)` HTTP/1.1,
/// `None` not yet known (a beginning of the preface).
fn verdict(seen: &[u8]) -> Option<bool> {
    let n = seen.len().min(PREFACE.len());
    if seen[..n] != PREFACE[..n] {
        Some(false)
    } else if n == PREFACE.len() {
        Some(true)
    } else {
        None
    }
}

/// Reads until the protocol is known: `Some((is_h2, bytes read))`, or `None`
/// when the client closed, sent nothing within `limit`, or stayed silent for
/// `grace` after a stop began.
pub async fn sniff<T>(
    stream: &mut T,
    stop: &mut watch::Receiver<bool>,
    limit: Option<Duration>,
    grace: Duration,
) -> Option<(bool, Bytes)>
where
    T: AsyncRead + Unpin,
{
    let mut buf = BytesMut::with_capacity(FIRST_READ);
    let far = Duration::from_secs(86400 * 365);
    let mut deadline = Instant::now() + limit.unwrap_or(far);
    let mut stopping = *stop.borrow();
    if stopping {
        deadline = deadline.min(Instant::now() + grace);
    }
    loop {
        tokio::select! {
            read = stream.read_buf(&mut buf) => {
                match read {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {
                        if let Some(h2) = verdict(&buf) {
                            return Some((h2, buf.freeze()));
                        }
                    }
                }
            }
            _ = tokio::time::sleep_until(deadline) => return None,
            _ = stop.changed(), if !stopping => {
                stopping = true;
                deadline = deadline.min(Instant::now() + grace);
            }
        }
    }
}

/// A stream whose first bytes were read already: they are read again first.
pub struct Prefixed<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Prefixed<T> {
    pub fn new(prefix: Bytes, inner: T) -> Self {
        Prefixed { prefix, inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            if this.prefix.is_empty() {
                // An emptied slice still holds the whole first read's
                // buffer (8 KiB), for as long as the connection lasts.
                this.prefix = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

/// The prefix is what was read ahead: writes, files too, go straight through.
impl<T: SendFile + Unpin> SendFile for Prefixed<T> {
    send_file_through!();
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    write_through!();

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn the_preface_decides() {
        assert_eq!(verdict(b"GET / HTTP/1.1\r\n"), Some(false));
        assert_eq!(verdict(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"), Some(true));
        assert_eq!(verdict(b"PRI * HT"), None);
        assert_eq!(verdict(b"PRI * HTTP/1.1\r\n"), Some(false));
        assert_eq!(verdict(b"P"), None);
        assert_eq!(verdict(b"PUT"), Some(false));
    }
}
