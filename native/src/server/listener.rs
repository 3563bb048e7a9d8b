//! Accept loops on the inherited listening sockets. Each runtime accepts on
//! its own duplicate of the fd, so the listeners stay owned by Python (and by
//! the arbiter) and closing ours only stops this worker accepting.

use std::io;
use std::net::IpAddr;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::connection::{self, Proto};
use super::counters::Held;
use super::exchange::ConnInfo;
use super::proxy_read::read_header;
use super::room::{Admission, Room, Ticket};
use super::send_file::SendFile;
use super::shared::Shared;
use super::sniff::Prefixed;
use super::tls;

#[derive(Debug, Clone, Copy)]
pub struct ListenFd {
    pub fd: RawFd,
    pub unix: bool,
}

pub(super) fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: the worker keeps the listening socket open for as long as the
    // server runs (it owns the Python socket object); we only duplicate it.
    unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
}

/// Errors after which accepting again makes sense (the peer left early, or
/// we ran out of descriptors or memory for a moment).
fn pause_for(err: &io::Error) -> Option<Duration> {
    match err.raw_os_error() {
        Some(code) if code == 103 || code == 71 || code == 1 => Some(Duration::ZERO), // ECONNABORTED, EPROTO, EPERM
        Some(code) if code == 24 || code == 23 || code == 105 || code == 12 => {
            Some(Duration::from_millis(100)) // EMFILE, ENFILE, ENOBUFS, ENOMEM
        }
        _ => None,
    }
}

/// One accepted connection: the stream, what the exchanges see of it, and
/// the peer's IP (`None` on a unix socket).
type Accepted<S> = (S, ConnInfo, Option<IpAddr>);

/// A listening socket: what one accepted connection is, and who is on it.
trait Accept: Send + Sync + 'static {
    type Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + SendFile + Unpin + Send + 'static;
    fn accept(
        &self,
        scheme: &'static str,
    ) -> impl std::future::Future<Output = io::Result<Accepted<Self::Stream>>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&self, scheme: &'static str) -> io::Result<Accepted<Self::Stream>> {
        let (stream, peer) = tokio::net::TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        let local = stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let mut info = ConnInfo::new(peer.to_string(), local, scheme);
        info.socket = Some(std::os::fd::AsRawFd::as_raw_fd(&stream));
        Ok((stream, info, Some(peer.ip())))
    }
}

/// A unix listener and its path (the `server` of its connections).
struct UnixAt(tokio::net::UnixListener, String);

impl Accept for UnixAt {
    type Stream = tokio::net::UnixStream;
    async fn accept(&self, scheme: &'static str) -> io::Result<Accepted<Self::Stream>> {
        let (stream, _) = self.0.accept().await?;
        let mut info = ConnInfo::new(String::new(), self.1.clone(), scheme);
        info.socket = Some(std::os::fd::AsRawFd::as_raw_fd(&stream));
        Ok((stream, info, None))
    }
}

/// Starts accepting on `l` in the current runtime; returns at once.
pub fn spawn(l: ListenFd, shared: Arc<Shared>, stop: watch::Receiver<bool>) -> io::Result<()> {
    let fd = dup(l.fd)?;
    if l.unix {
        let std = std::os::unix::net::UnixListener::from(fd);
        std.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(std)?;
        let path = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
            .unwrap_or_default();
        accept_loop(UnixAt(listener, path), shared, stop);
    } else {
        let std = std::net::TcpListener::from(fd);
        std.set_nonblocking(true)?;
        accept_loop(tokio::net::TcpListener::from_std(std)?, shared, stop);
    }
    Ok(())
}

/// Accepts until the stop; each connection is counted from its accept.
fn accept_loop<A: Accept>(listener: A, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let accepting = shared.counters.accepting();
    tokio::spawn(async move {
        let _accepting = accepting;
        let mut stop_rx = stop.clone();
        loop {
            // At --worker-connections, newcomers wait in the backlog (room.rs).
            let next = async {
                if let Some(room) = &shared.room {
                    room.vacancy().await;
                }
                loop {
                    shared.counters.loop_alive().await;
                    // Cancel-safe: a connection not yet taken stays in the backlog.
                    tokio::select! {
                        accepted = listener.accept(shared.config.scheme) => break accepted,
                        () = shared.counters.loop_goes_stuck() => {}
                    }
                }
            };
            tokio::select! {
                accepted = next => match accepted {
                    Ok(accepted) => {
                        let open = shared.counters.connection();
                        // Seated here, before the room is looked at again: a
                        // seat taken later, by the connection's task, let a
                        // backlog of connections all be accepted on one
                        // vacancy and wait unseated (held past
                        // --worker-connections).
                        let first = shared.room.as_ref().map(|room| room.admit());
                        let displaced =
                            matches!(&first, Some(Admission::Seated(t)) if t.displaced);
                        tokio::spawn(run(accepted, shared.clone(), stop.clone(), open, first));
                        if displaced {
                            // The connection whose seat this took closes its
                            // socket when its task runs: let it, before the
                            // next accept. Accepting on, a backlog took every
                            // seat that had waited GRACE at once and held up
                            // to twice --worker-connections sockets a moment.
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => pause(&e).await,
                },
                _ = stop_rx.changed() => break,
            }
        }
    });
}

async fn pause(err: &io::Error) {
    let d = pause_for(err).unwrap_or(Duration::from_millis(100));
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// One connection, counted (by `open`) from its accept until it ends, its
/// PROXY header and TLS handshake included; under `--worker-connections`
/// from its seat (room.rs), and dropped when its seat goes to a newer one.
async fn run<S>(
    mut accepted: Accepted<S>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    open: Held,
    first: Option<Admission>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + SendFile + Unpin + Send + 'static,
{
    let Some(room) = shared.room.clone() else {
        serve(accepted, shared, stop).await;
        drop(open);
        return;
    };
    let seated = match first {
        Some(Admission::Seated(ticket)) => Some(ticket),
        _ => seat(&room, stop.clone()).await,
    };
    match seated {
        // Stopping before a seat came: served anyway, it was accepted.
        None => serve(accepted, shared, stop).await,
        Some(ticket) => {
            // Looked at from now on: it may lose its seat once it waited GRACE.
            let cfg = &shared.config;
            let now = tokio::time::Instant::now();
            let first = cfg.header_timeout.or(cfg.keepalive).map(|d| now + d);
            ticket.seat.wait(now, first);
            accepted.1.seat = Some(ticket.seat.clone());
            let connection = serve(accepted, shared.clone(), stop);
            ticket.seat.hold(connection).await;
        }
    }
    drop(open);
}

/// A seat for an accepted connection. The accept loop waited for one, but
/// another loop may have taken it, or its waiting owner gone busy: then this
/// connection waits, unread, as it would have in the backlog.
async fn seat(room: &Arc<Room>, mut stop: watch::Receiver<bool>) -> Option<Ticket> {
    loop {
        if let Admission::Seated(ticket) = room.admit() {
            return Some(ticket);
        }
        if *stop.borrow_and_update() {
            return None;
        }
        tokio::select! {
            () = room.vacancy() => {}
            _ = stop.changed() => {}
        }
    }
}

/// The TLS handshake, then the protocol it negotiated (ALPN) or the sniff.
async fn serve_tls<S>(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: Prefixed<S>,
    mut info: ConnInfo,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + SendFile + Unpin + Send + 'static,
{
    let Some(tls) = tls::handshake(acceptor, stream, shared.config.header_timeout).await else {
        return;
    };
    let proto = Proto::pick(shared.config.http, tls::negotiated_h2(&tls));
    info.tls = Some(tls::info(&tls));
    connection::serve(tls, info, shared, stop, proto).await;
}

/// What nginx answers a plain HTTP request on a TLS port: the client (a
/// developer's curl without `https://`, often) reads why, where a TLS alert
/// would be bytes it cannot make sense of.
const PLAIN_HTTP_ON_TLS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 46\r\nConnection: close\r\n\r\n400 Bad Request\nThis port speaks HTTPS (TLS).\n";

/// The connection's first bytes, after what the PROXY header left over
/// (`rest`); `None` when the client sends nothing within `limit`.
async fn first_bytes<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    rest: bytes::Bytes,
    limit: Option<std::time::Duration>,
) -> Option<bytes::Bytes> {
    use tokio::io::AsyncReadExt;
    if !rest.is_empty() {
        return Some(rest);
    }
    // What rustls would read first anyway: the ClientHello, in one read.
    let mut buf = bytes::BytesMut::with_capacity(4096);
    let read = stream.read_buf(&mut buf);
    let n = match limit {
        Some(limit) => tokio::time::timeout(limit, read).await.ok()?.ok()?,
        None => read.await.ok()?,
    };
    (n > 0).then(|| buf.freeze())
}

/// A TLS connection starts with a handshake record (22); an HTTP request
/// starts with a method, upper-case letters.
fn plain_http(first: &[u8]) -> bool {
    first.first().is_some_and(u8::is_ascii_uppercase)
}

async fn refuse_plain_http<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut stream: S) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.write_all(PLAIN_HTTP_ON_TLS).await;
    let _ = stream.shutdown().await;
    // The rest of the request, drained for a moment: closing with it unread
    // would reset the connection under the answer.
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// The PROXY header if one is owed, the TLS handshake if the listeners
/// speak TLS, then the connection's protocol.
async fn serve<S>(
    (mut stream, mut info, peer): Accepted<S>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + SendFile + Unpin + Send + 'static,
{
    // Always wrapped, so that one instance of the server's code serves both
    // settings; with nothing to hand back a read costs one length check.
    let mut rest = bytes::Bytes::new();
    if let Some(allow) = &shared.config.proxy {
        // Unix-socket peers are trusted (the socket file's mode decides who connects).
        if peer.is_none_or(|ip| allow.trusts(ip)) {
            // A peer that owes a header and sends none is closed, unanswered.
            let Some((header, after)) =
                read_header(&mut stream, shared.config.header_timeout).await
            else {
                return;
            };
            if let Some(source) = header.source {
                info.client = source.to_string();
            }
            rest = after;
        }
    }
    if shared.tls.is_some() {
        match first_bytes(&mut stream, rest, shared.config.header_timeout).await {
            // Boxed: its drain buffer is not carried by every connection.
            Some(read) if plain_http(&read) => return Box::pin(refuse_plain_http(stream)).await,
            Some(read) => rest = read,
            None => return,
        }
    }
    let stream = Prefixed::new(rest, stream);
    let mode = shared.config.http;
    match shared.tls.clone() {
        None => connection::serve(stream, info, shared, stop, Proto::pick(mode, None)).await,
        // Boxed: a TLS connection's state (rustls, its own instance of the
        // connection's code) would otherwise make every plain connection's
        // task as large as a TLS one's.
        Some(acceptor) => Box::pin(serve_tls(acceptor, stream, info, shared, stop)).await,
    }
}

#[cfg(test)]
mod plain_http_tests {
    use super::{plain_http, PLAIN_HTTP_ON_TLS};

    #[test]
    fn the_answer_is_framed_and_requests_are_told_from_handshakes() {
        let text = std::str::from_utf8(PLAIN_HTTP_ON_TLS).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())));
        assert!(plain_http(b"GET / HTTP/1.1\r\n"));
        assert!(!plain_http(&[0x16, 0x03, 0x01]));
        assert!(!plain_http(b""));
    }
}
