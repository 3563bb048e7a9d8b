//! One HTTP/3 request stream: its head checked, handed to
//! `service::answer` like any other request, and the response written back
//! frame by frame (each send waits for the client's flow control, so a slow
//! reader holds one chunk, not the whole body).

use std::sync::Arc;

use bytes::Bytes;
use h3::server::{RequestResolver, RequestStream};
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode};

use super::body::RequestBody;
use crate::server::body::ResponseBody;
use crate::server::exchange::ConnInfo;
use crate::server::incoming::Incoming;
use crate::server::service;
use crate::server::shared::Shared;

type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

pub(super) async fn serve(
    resolver: RequestResolver<h3_quinn::Connection, Bytes>,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
) {
    // h3 resets a stream whose head breaks RFC 9114 (pseudo-header fields
    // missing, repeated or out of place; upper-case names) with
    // H3_MESSAGE_ERROR, as h2 does on HTTP/2, and answers 431 past
    // the field section limit.
    // A stream that never sends its head is dropped after --header-timeout,
    // as a connection that never sends one is on HTTP/1.1.
    let resolving = resolver.resolve_request();
    let resolved = match shared.config.header_timeout {
        Some(limit) => match tokio::time::timeout(limit, resolving).await {
            Ok(resolved) => resolved,
            Err(_) => return,
        },
        None => resolving.await,
    };
    let Ok((request, stream)) = resolved else {
        return;
    };
    conn.saw_request();
    let (mut send, recv) = stream.split();
    let (head, ()) = request.into_parts();
    let head_only = head.method == Method::HEAD;
    let response = match connection_specific(&head.headers) {
        Some(name) => refusal(name),
        None => {
            let declared = content_length(&head.headers);
            let body = Incoming::H3(RequestBody::new(recv, declared));
            // Boxed: the answer's state is large, and inline it would make every
            // request task (and so the copy into tokio's task cell) that large.
            Box::pin(service::answer_h3(head, body, shared.clone(), conn.clone())).await
        }
    };
    let send_timeout = shared.config.send_timeout;
    let date_header = shared.config.date_header;
    let written = write(&mut send, response, head_only, send_timeout, date_header).await;
    if written == Err(Stalled::Timeout) {
        // Logged as the TCP classes log theirs; the stream is given up (it
        // is reset as it drops), the connection's other streams go on.
        shared.dropped.push(|| crate::server::answered::Dropped {
            client: conn.client.clone(),
            why: "it read nothing within send_timeout (HTTP/3 stream)",
        });
    }
}

/// RFC 9114 4.2: fields that only mean something on one HTTP/1.1 hop make a
/// request malformed; `te` may only say "trailers".
fn connection_specific(headers: &hyper::HeaderMap) -> Option<&'static str> {
    const HOP: [&str; 5] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ];
    if let Some(name) = HOP.iter().find(|n| headers.contains_key(**n)) {
        return Some(name);
    }
    let te_other = headers
        .get_all(hyper::header::TE)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    te_other.then_some("te")
}

fn refusal(name: &'static str) -> Response<ResponseBody> {
    let text = if name == "te" {
        "TE other than trailers"
    } else {
        "Connection-specific header field"
    };
    let mut response = Response::new(ResponseBody::full(text));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

fn content_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Fields HTTP/3 does not carry (RFC 9114 4.2): the server's own
/// `Connection: close` and anything an app set for HTTP/1.1's framing.
/// Alt-Svc too: the client that reads it is on HTTP/3 already, and QPACK
/// would Huffman-code it into every response.
const NOT_ON_H3: [HeaderName; 5] = [
    hyper::header::CONNECTION,
    hyper::header::TRANSFER_ENCODING,
    HeaderName::from_static("keep-alive"),
    hyper::header::UPGRADE,
    hyper::header::ALT_SVC,
];

async fn write(
    send: &mut SendHalf,
    response: Response<ResponseBody>,
    head_only: bool,
    send_timeout: Option<std::time::Duration>,
    date_header: bool,
) -> Result<(), Stalled> {
    let (mut parts, mut body) = response.into_parts();
    for name in NOT_ON_H3.iter() {
        parts.headers.remove(name);
    }
    if date_header && !parts.headers.contains_key(hyper::header::DATE) {
        // hyper adds it on HTTP/1.1 and HTTP/2 (RFC 9110 6.6.1); cached per second.
        let date = crate::http1_codec::date::http_date_now();
        if let Ok(value) = HeaderValue::from_bytes(&date) {
            parts.headers.insert(hyper::header::DATE, value);
        }
    }
    if head_only {
        // RFC 9110 9.3.2 lets a HEAD response leave out what only the content
        // settles; aioquic (and qh3, niquests') take a Content-Length
        // without DATA for a malformed response and close the connection.
        parts.headers.remove(hyper::header::CONTENT_LENGTH);
    } else if !parts.headers.contains_key(hyper::header::CONTENT_LENGTH) {
        if let Some(n) = hyper::body::Body::size_hint(&body).exact() {
            parts
                .headers
                .insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    let no_body = head_only
        || parts.status.is_informational()
        || parts.status == StatusCode::NO_CONTENT
        || parts.status == StatusCode::NOT_MODIFIED;
    let head = Response::from_parts(parts, ());
    within(send_timeout, send.send_response(head)).await?;
    if no_body {
        drop(body);
        return within(send_timeout, send.finish()).await;
    }
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            // The app's stream was cut off: the client must see it incomplete.
            send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
            return Err(Stalled::Failed);
        };
        match frame.into_data() {
            Ok(data) => {
                if !data.is_empty() {
                    within(send_timeout, send.send_data(data)).await?;
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    within(send_timeout, send.send_trailers(trailers)).await?;
                    break;
                }
            }
        }
    }
    within(send_timeout, send.finish()).await
}

/// Why a response was not written to its end.
#[derive(Debug, PartialEq, Eq)]
enum Stalled {
    /// A send waited for the client's flow control past `--send-timeout`.
    Timeout,
    /// The stream or connection failed, or the app's body did.
    Failed,
}

/// A send that waits for the client's flow control longer than
/// `--send-timeout` gives the stream up (the client is not reading).
async fn within<T, E>(
    limit: Option<std::time::Duration>,
    send: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Stalled> {
    match limit {
        Some(limit) => match tokio::time::timeout(limit, send).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(Stalled::Failed),
            Err(_) => Err(Stalled::Timeout),
        },
        None => send.await.map_err(|_| Stalled::Failed),
    }
}
