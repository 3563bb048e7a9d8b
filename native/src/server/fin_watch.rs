//! The client's FIN while an app waits for it. hyper serves half-closed
//! HTTP/1.1 clients (connection.rs), so it does not read while a request is
//! in the app's hands and never sees the FIN of a client that left. An app
//! that asks (ASGI's `receive()` after the body) gets this watch instead: the
//! socket's read side closed (EPOLLRDHUP), seen through a duplicate of its
//! fd registered with the runtime, without reading a byte hyper should get.
//! Pipelined bytes already waiting make the socket readable but not closed:
//! the watch clears that readiness and waits for the next edge.

use std::io;
use std::os::fd::BorrowedFd;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::ConnInfo;

/// Resolves once the client shut its sending side. Start it only while the
/// exchange is live (the socket is then still the connection's), and end it
/// when the exchange ends: the duplicate keeps the socket open while it lives.
/// Err when there is no socket to watch (HTTP/2, whose streams end through
/// hyper anyway) or it cannot be watched.
pub async fn client_fin(conn: &ConnInfo) -> io::Result<()> {
    let Some(fd) = conn.socket.filter(|_| !conn.is_h2()) else {
        return Err(io::ErrorKind::Unsupported.into());
    };
    // SAFETY: the connection, which owns `fd`, outlives the live exchange
    // this runs for; the duplicate is ours.
    let own = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
    // SAFETY: an OwnedFd always returns its own open fd, until it is dropped
    // with the AsyncFd.
    let watched = unsafe { AsyncFd::register_with_interest(own, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)?;
    loop {
        let mut ready = watched.readable().await?;
        if ready.ready().is_read_closed() {
            return Ok(());
        }
        ready.clear_ready();
    }
}
