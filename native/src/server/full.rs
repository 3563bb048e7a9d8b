//! The answer of a worker at `--worker-connections` whose every seat is in
//! a request (room.rs): 503 "Too many connections", as the asgi worker
//! answers, in the client's protocol. The connection went through its PROXY
//! header, TLS handshake and protocol sniff as any other, so that the answer
//! reaches the client in a form it reads.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use super::body::ResponseBody;
use super::h1_direct::Io;
use super::h1_wire::error_bytes;
use super::runtime::Shared;

const REASON: &str = "Too many connections";
/// How long the refused client has to send its request (HTTP/2) or may go
/// on sending after the answer (HTTP/1.1: closing with unread input resets
/// the connection under it).
const LINGER: Duration = Duration::from_millis(1000);

pub(super) async fn refuse<I: Io>(io: I, h2: bool, shared: &Shared) {
    if h2 {
        refuse_h2(io, shared).await;
    } else {
        refuse_h1(io).await;
    }
}

async fn refuse_h1<I: Io>(mut io: I) {
    if io.write_all(&error_bytes(503, REASON, true)).await.is_err() {
        return;
    }
    let _ = io.shutdown().await;
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0u8; 4096];
        while matches!(io.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// The streams the client opened before our GOAWAY get the 503. GOAWAY
/// waits for the first request: before it, hyper would close unanswered.
async fn refuse_h2<I: Io>(io: I, shared: &Shared) {
    let asked = Arc::new(Notify::new());
    let service = {
        let asked = asked.clone();
        service_fn(move |_| {
            asked.notify_one();
            async {
                let mut answer = Response::new(ResponseBody::full(format!("503 {REASON}\n")));
                *answer.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                Ok::<_, Infallible>(answer)
            }
        })
    };
    let connection = shared.http.h2.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let _ = tokio::time::timeout(LINGER, async {
        tokio::select! {
            _ = connection.as_mut() => return,
            () = asked.notified() => {}
        }
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    })
    .await;
}
