//! One HTTP/3 request stream: its head checked, handed to
//! `service::answer` like any other request, and the response written back
//! frame by frame (each send waits for the client's flow control, so a slow
//! reader holds one chunk, not the whole body).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h3::server::{RequestResolver, RequestStream};
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::body::RequestBody;
use super::connection::StreamHold;
use crate::server::body::ResponseBody;
use crate::server::exchange::ConnInfo;
use crate::server::incoming::Incoming;
use crate::server::send_pace::SendPace;
use crate::server::service;
use crate::server::shared::Shared;

type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;
type Stream = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;
pub(super) type Resolver = RequestResolver<h3_quinn::Connection, Bytes>;

/// `_hold`: dropped when this returns, the response written (connection.rs).
///
/// The three long steps (reading the head, the answer, the write) are each
/// awaited boxed. tokio moves a task's future whole into its cell, and its
/// size is that of its largest state: with the three inline it was 8 KB,
/// and moving it and its parts was 9.7k of the 81k instructions a GET cost.
pub(super) async fn serve(
    resolver: Resolver,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
    _hold: StreamHold,
) {
    let Some((request, stream)) = Box::pin(resolve(resolver, shared.config.header_timeout)).await
    else {
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
            let body = Incoming::H3(Box::new(RequestBody::new(recv, declared)));
            Box::pin(service::answer_h3(head, body, shared.clone(), conn.clone())).await
        }
    };
    let mut bounds = SendBounds::new(shared.config.send_timeout, shared.config.send_min_rate);
    let date_header = shared.config.date_header;
    let written = Box::pin(write(
        &mut send,
        response,
        head_only,
        &mut bounds,
        date_header,
    ))
    .await;
    let why = match written {
        Err(Stalled::Timeout) => "it read nothing within send_timeout (HTTP/3 stream)",
        Err(Stalled::TooSlow) => "it read slower than send_min_rate (HTTP/3 stream)",
        _ => return,
    };
    // Reset, not dropped: quinn finishes a stream that is dropped, and the
    // client would take what it got for the whole response.
    send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    // Logged as the TCP classes log theirs; the connection's other streams
    // go on.
    shared.dropped.push(|| crate::server::answered::Dropped {
        client: conn.client.clone(),
        why,
    });
}

/// The request's head, None when the stream ended or broke the rules first.
///
/// h3 resets a stream whose head breaks RFC 9114 (pseudo-header fields
/// missing, repeated or out of place; upper-case names) with
/// H3_MESSAGE_ERROR, as h2 does on HTTP/2, and answers 431 past the field
/// section limit. A stream that never sends its head is dropped after
/// `--header-timeout`, as a connection that never sends one is on HTTP/1.1.
async fn resolve(resolver: Resolver, limit: Option<Duration>) -> Option<(Request<()>, Stream)> {
    let resolving = resolver.resolve_request();
    let resolved = match limit {
        Some(limit) => tokio::time::timeout(limit, resolving).await.ok()?,
        None => resolving.await,
    };
    resolved.ok()
}

/// Fields that only mean something on one HTTP/1.1 hop (RFC 9114 4.2): a
/// request that carries one is malformed, and a response leaves them out
/// (the server's own `Connection: close`, an app's HTTP/1.1 framing).
static HOP: [HeaderName; 5] = [
    hyper::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    hyper::header::TRANSFER_ENCODING,
    hyper::header::UPGRADE,
];

/// RFC 9114 4.2: a hop-by-hop field makes a request malformed; `te` may only
/// say "trailers". One pass over the request's few fields, not a hashed
/// lookup for each name asked about.
fn connection_specific(headers: &hyper::HeaderMap) -> Option<&'static str> {
    let mut te_other = false;
    for (name, value) in headers {
        if let Some(hop) = HOP.iter().find(|hop| *hop == name) {
            return Some(hop.as_str());
        }
        if name == hyper::header::TE && !value.as_bytes().eq_ignore_ascii_case(b"trailers") {
            te_other = true;
        }
    }
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

async fn write(
    send: &mut SendHalf,
    response: Response<ResponseBody>,
    head_only: bool,
    bounds: &mut SendBounds,
    date_header: bool,
) -> Result<(), Stalled> {
    let (mut parts, mut body) = response.into_parts();
    // HTTP/1.1's connection fields are rarely there: looked for in one pass
    // over the response's names. (The server's Alt-Svc is never added to an
    // HTTP/3 response: service.rs, with_server.)
    if parts.headers.keys().any(|name| HOP.contains(name)) {
        for name in HOP.iter() {
            parts.headers.remove(name);
        }
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
    bounds.within(send.send_response(head)).await?;
    if no_body {
        drop(body);
        return bounds.within(send.finish()).await;
    }
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            // The app's stream was cut off: the client must see it incomplete.
            send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
            return Err(Stalled::Failed);
        };
        match frame.into_data() {
            Ok(data) => send_paced(send, data, bounds).await?,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    bounds.within(send.send_trailers(trailers)).await?;
                    break;
                }
            }
        }
    }
    bounds.within(send.finish()).await
}

/// The most of a body one send hands the stream: a send returns only once
/// the client's flow control let all of it in, so this is how finely the
/// client's progress is seen by `--send-timeout` (a client taking less than
/// this within it is dropped) and `--send-min-rate`.
const SEND_PIECE: usize = 16 * 1024;

async fn send_paced(
    send: &mut SendHalf,
    mut data: Bytes,
    bounds: &mut SendBounds,
) -> Result<(), Stalled> {
    while !data.is_empty() {
        let piece = if data.len() > SEND_PIECE {
            data.split_to(SEND_PIECE)
        } else {
            std::mem::take(&mut data)
        };
        let len = piece.len();
        bounds.within(send.send_data(piece)).await?;
        if let Some(pace) = bounds.pace.as_mut() {
            pace.took(len);
        }
    }
    Ok(())
}

/// Why a response was not written to its end.
#[derive(Debug, PartialEq, Eq)]
enum Stalled {
    /// A send waited for the client's flow control past `--send-timeout`.
    Timeout,
    /// The client let the response in slower than `--send-min-rate`.
    TooSlow,
    /// The stream or connection failed, or the app's body did.
    Failed,
}

/// `--send-timeout` and `--send-min-rate` for one stream, counted over the
/// time its sends wait for the client (send_pace.rs; the TCP connections'
/// twin is write_stall.rs).
struct SendBounds {
    limit: Option<Duration>,
    pace: Option<SendPace>,
}

impl SendBounds {
    fn new(limit: Option<Duration>, min_rate: u64) -> SendBounds {
        SendBounds {
            limit,
            pace: SendPace::new(limit, min_rate),
        }
    }

    /// A send that waits for the client's flow control longer than
    /// `--send-timeout`, or past the end of the floor's window while the
    /// client is under it, gives the stream up.
    async fn within<T, E>(
        &mut self,
        send: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Stalled> {
        let Some(limit) = self.limit else {
            return send.await.map_err(|_| Stalled::Failed);
        };
        let started = Instant::now();
        tokio::pin!(send);
        loop {
            let waiting = started.elapsed();
            let mut wake = limit.saturating_sub(waiting);
            if let Some(pace) = self.pace.as_ref() {
                wake = wake.min(pace.window_left(waiting));
            }
            match tokio::time::timeout(wake, send.as_mut()).await {
                Ok(done) => {
                    if let Some(pace) = self.pace.as_mut() {
                        pace.wait_ended(started.elapsed());
                    }
                    return done.map_err(|_| Stalled::Failed);
                }
                Err(_) => {
                    let waiting = started.elapsed();
                    if waiting >= limit {
                        return Err(Stalled::Timeout);
                    }
                    if self.pace.as_mut().is_some_and(|p| p.too_slow(waiting)) {
                        return Err(Stalled::TooSlow);
                    }
                }
            }
        }
    }
}
