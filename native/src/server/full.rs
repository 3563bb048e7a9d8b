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
use tokio::sync::Notify;

use super::body::ResponseBody;
use super::exchange::ConnInfo;
use super::h1_direct::Io;
use super::h1_wire::Wire;
use super::runtime::Shared;

const REASON: &str = "Too many connections";
/// How long the refused HTTP/2 client has to send its request.
const LINGER: Duration = Duration::from_millis(1000);

pub(super) async fn refuse<I: Io>(io: I, h2: bool, conn: &ConnInfo, shared: &Shared) {
    if h2 {
        refuse_h2(io, shared).await;
    } else {
        // The HTTP/1.1 loops' own refusal: the answer, then the linger.
        let mut wire = Wire::new(io, conn);
        wire.refuse(503, REASON, true).await;
        wire.close(true).await;
    }
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
