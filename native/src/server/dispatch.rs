//! What the server hands its requests to: the bridge (every interface whose
//! app runs on the worker's loop) or the WSGI engine, which may also serve
//! HTTP/1.1 connections itself. The server knows nothing else of them.

use std::sync::Arc;

use super::exchange::{ConnInfo, Exchange};
use super::send_file::SendFile;
use super::shared::Shared;
use super::websocket::WsExchange;

pub trait Dispatch: Send + Sync {
    fn dispatch(&self, exchange: Exchange);
    fn dispatch_ws(&self, exchange: WsExchange);
    /// Whether its answers may send interim (1xx) responses: direct_http1.rs
    /// then gives each HTTP/1.1 exchange an `Interim` queue.
    fn writes_interim(&self) -> bool {
        false
    }
    /// Whether this dispatcher drives HTTP/1.1 connections itself
    /// (`serve_h1`) instead of answering hyper's exchanges.
    fn serves_h1(&self) -> bool {
        false
    }
    /// One HTTP/1.1 connection, to its end (when `serves_h1`).
    fn serve_h1(
        &self,
        io: BoxIo,
        conn: Arc<ConnInfo>,
        shared: Arc<Shared>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Served {
        drop((io, conn, shared, stop));
        Box::pin(async {})
    }
    /// On each runtime thread, before it serves and when it ends (the WSGI
    /// engine keeps the thread's Python state in between).
    fn thread_started(&self) {}
    fn thread_stopping(&self) {}
}

/// A connection's byte stream, whatever lies under it (TCP, unix, TLS).
pub type BoxIo = std::pin::Pin<Box<dyn ReadWrite>>;
pub trait ReadWrite: tokio::io::AsyncRead + tokio::io::AsyncWrite + SendFile + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + SendFile + Send> ReadWrite for T {}
pub type Served = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
