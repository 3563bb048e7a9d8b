//! One request: checks, hand-over to the dispatcher, and the reply turned
//! into a hyper response.

use std::convert::Infallible;
use std::sync::Arc;

use super::incoming::Incoming;
use hyper::header::{HeaderValue, CONNECTION, SERVER};
use hyper::upgrade::OnUpgrade;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use std::io::SeekFrom;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;

use super::body::plain;
use super::body::{ExchangeGuard, Framing, ResponseBody};
use super::exchange::{ConnInfo, Exchange, ExchangeBody, Tracker};
use super::exchange_head::ExchangeHead;
use super::health::{Answer, Probed};
use super::hyper_head_rules;
use super::reply::Reply;
use super::reply_batch::ReplySlot;
use super::shared::Shared;
use super::websocket;
use crate::static_files::{StaticAnswer, StaticBody, StaticRequest};

pub async fn handle(
    req: Request<hyper::body::Incoming>,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
) -> Result<Response<ResponseBody>, Infallible> {
    let index = conn.saw_request();
    let h1 = req.version() < Version::HTTP_2;
    let connect = req.method() == Method::CONNECT;
    let (head, body) = req.into_parts();
    let mut response = answer(head, Incoming::Hyper(body), shared, conn.clone(), h1).await;
    if connect && response.status().is_success() {
        // A 2xx to CONNECT carries no content (RFC 9110 9.3.6): what follows
        // it is the tunnel. hyper refuses a body there, and cuts the connection.
        response.headers_mut().remove(hyper::header::CONTENT_LENGTH);
        response = response.map(ResponseBody::without_content);
    }
    if h1 {
        // What hyper will do with the bytes after this request (precheck_io.rs
        // holds them back after a request that asked to upgrade).
        let status = response.status();
        let upgraded =
            status == StatusCode::SWITCHING_PROTOCOLS || (connect && status.is_success());
        conn.upgrade.settle(index, upgraded);
    }
    Ok(response)
}

/// An HTTP/3 request (h3/request.rs), under the same rules as HTTP/2's.
pub(super) async fn answer_h3(
    head: hyper::http::request::Parts,
    body: Incoming,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
) -> Response<ResponseBody> {
    answer(head, body, shared, conn, false).await
}

async fn answer(
    mut head: hyper::http::request::Parts,
    body: Incoming,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
    h1: bool,
) -> Response<ResponseBody> {
    let on_h3 = conn.is_h3();
    let websocket = shared.config.ws.is_some()
        && (websocket::is_upgrade(&head) || websocket::is_h2_connect(&head));
    if !websocket {
        close_when_handed_over(&mut head);
    }
    if let Err(r) = hyper_head_rules::check(&mut head, &shared.config) {
        return plain(r.status, r.reason, h1);
    }
    if let Some(probe) = shared.probe(head.method.as_str().as_bytes(), head.uri.path().as_bytes()) {
        return answer_probe(probe, &head, &shared, &conn, h1);
    }
    let statics = shared.config.static_files.as_ref();
    if statics.is_some_and(|files| files.claims(head.uri.path().as_bytes())) {
        if let Some(answer) = shared.static_answer(&static_request(&head)) {
            return answer_static(answer, &head, &shared, conn, h1);
        }
    }
    if websocket {
        let response = match websocket::check(&head) {
            Ok(handshake) => websocket::upgrade(head, shared.clone(), conn, handshake).await,
            Err(refused) => refused.response(),
        };
        return with_server(response, &shared.config, on_h3);
    }
    if websocket::is_other_h2_protocol(&head) {
        // An app cannot see `:protocol`, so it could not tell this stream
        // from a plain CONNECT.
        let response = plain(StatusCode::NOT_IMPLEMENTED, "Unknown :protocol", false);
        return with_server(response, &shared.config, on_h3);
    }
    let tracker = Arc::new(Tracker::default());
    // Dropped with the response body (written or cut off), or here when the
    // connection goes away while the app is still working.
    let Some(guard) = shared.let_in(tracker.clone(), conn.clone()).await else {
        let (status, text) = super::gate::BUSY;
        return with_server(plain(status, text, false), &shared.config, on_h3);
    };
    let (tx, rx) = oneshot::channel();
    let ordinal = guard.ordinal;
    shared.dispatch.dispatch(Exchange {
        head: ExchangeHead::Hyper(head),
        body: ExchangeBody::Incoming(body),
        conn,
        reply: ReplySlot::new(tx),
        tracker: tracker.clone(),
        limit_body: shared.config.limit_request_body,
    });
    let response = match rx.await {
        Ok(reply) => respond(reply, guard, tracker).await,
        // The answerer dropped the request without a reply (it logs why).
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            h1,
        ),
    };
    let mut response = with_server(response, &shared.config, on_h3);
    if h1 && shared.closes_after(ordinal) {
        // hyper closes the connection after a response that says so.
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// What the static files (`--static-map`) read of a request.
fn static_request(head: &hyper::http::request::Parts) -> StaticRequest<'_> {
    StaticRequest::of(
        head.method.as_str().as_bytes(),
        head.uri.path().as_bytes(),
        |name| {
            head.headers
                .get(std::str::from_utf8(name).unwrap_or(""))
                .map(|v| v.as_bytes())
        },
    )
}

/// What the access log reads of a request this service answers itself.
fn probed_of<'a>(head: &'a hyper::http::request::Parts, conn: &'a ConnInfo) -> Probed<'a> {
    let field = |name| head.headers.get(name).map(|v: &HeaderValue| v.as_bytes());
    Probed {
        client: &conn.client,
        method: head.method.as_str().as_bytes(),
        target: head
            .uri
            .path_and_query()
            .map_or(b"/", |t| t.as_str().as_bytes()),
        version: version_text(head.version),
        head_only: head.method == Method::HEAD,
        referer: field(hyper::header::REFERER),
        user_agent: field(hyper::header::USER_AGENT),
    }
}

fn version_text(version: Version) -> &'static str {
    match version {
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/2.0",
    }
}

/// A static file's answer as a hyper response: counted as a request (and
/// waited for by a graceful stop) until hyper drops its body. Logged when it
/// is decided, with the body's length (the direct HTTP/1.1 loop, which
/// serves most of them, logs once written).
fn answer_static(
    answer: StaticAnswer,
    head: &hyper::http::request::Parts,
    shared: &Shared,
    conn: Arc<ConnInfo>,
    h1: bool,
) -> Response<ResponseBody> {
    let on_h3 = conn.is_h3();
    let guard = ExchangeGuard::new(
        Arc::new(Tracker::default()),
        shared.counters.clone(),
        conn.clone(),
    );
    let ordinal = guard.ordinal;
    let (framing, len) = match answer.body {
        StaticBody::Nothing => (Framing::Empty, None),
        StaticBody::Text(text) => (
            Framing::Full(Some(Bytes::from_static(text.as_bytes()))),
            Some(text.len() as u64),
        ),
        StaticBody::File {
            mut file,
            offset,
            len,
        } => {
            use std::io::Seek;
            // A file just opened is at 0: no seek (a system call) for it.
            if offset != 0 && file.seek(SeekFrom::Start(offset)).is_err() {
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal Server Error",
                    h1,
                );
            }
            (
                Framing::File {
                    file,
                    remaining: len,
                },
                Some(len),
            )
        }
    };
    let method = head.method.as_str().as_bytes();
    // hyper leaves out a HEAD response's body on HTTP/1.1 only; on HTTP/2 it
    // would send it. The length stays announced.
    let framing = if method == b"HEAD" {
        Framing::Empty
    } else {
        framing
    };
    shared.served_static(probed_of(head, &conn), answer.status, len.unwrap_or(0), 0.0);
    let mut response = Response::new(ResponseBody::new(framing, Some(guard)));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    for (name, value) in answer.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.append(name, value);
        }
    }
    if let Some(len) = len {
        headers.insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    if h1 && (shared.closes_after(ordinal) || has_body(head)) {
        // A body the answer did not read ends the connection, as on the
        // direct loop: hyper would otherwise close it unannounced.
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    with_server(response, &shared.config, on_h3)
}

/// Whether the request announced a body (HTTP/1.1 framing fields).
fn has_body(head: &hyper::http::request::Parts) -> bool {
    head.headers.contains_key(hyper::header::TRANSFER_ENCODING)
        || head
            .headers
            .get(hyper::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// A `--health-path` probe, answered here (gate.rs: `Shared::probe`).
fn answer_probe(
    probe: Answer,
    head: &hyper::http::request::Parts,
    shared: &Shared,
    conn: &ConnInfo,
    h1: bool,
) -> Response<ResponseBody> {
    let method = head.method.as_str().as_bytes();
    let on_h3 = conn.is_h3();
    shared.probed(probe, probed_of(head, conn));
    let body = if method == b"HEAD" { "" } else { probe.text() };
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = probe.status();
    *response.headers_mut() = probe.headers();
    response.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        HeaderValue::from(probe.text().len()),
    );
    if h1 && (shared.stopping.load(std::sync::atomic::Ordering::Acquire) || has_body(head)) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    with_server(response, &shared.config, on_h3)
}

/// hyper does not shut down a connection whose request asked to upgrade: once
/// done with it, it hands it to whoever awaits the upgrade, upgraded or not.
/// For requests that no protocol here takes over, that is this task, which
/// shuts it down as hyper would have (so a refusal precheck_io.rs still owes
/// is written, and TLS says goodbye).
fn close_when_handed_over(head: &mut hyper::http::request::Parts) {
    if let Some(handed_over) = head.extensions.remove::<OnUpgrade>() {
        tokio::spawn(async move {
            if let Ok(upgraded) = handed_over.await {
                let _ = TokioIo::new(upgraded).shutdown().await;
            }
        });
    }
}

async fn respond(
    reply: Reply,
    guard: ExchangeGuard,
    tracker: Arc<Tracker>,
) -> Response<ResponseBody> {
    let (status, headers, framing) = match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let framing = if body.is_empty() {
                Framing::Empty
            } else {
                Framing::Full(Some(body))
            };
            (status, headers, framing)
        }
        Reply::Stream {
            status,
            headers,
            chunks,
            trailers,
        } => (
            status,
            headers,
            Framing::Stream {
                chunks,
                trailers,
                tracker,
                flushed: false,
            },
        ),
        Reply::File {
            status,
            headers,
            path,
            range,
        } => match open_file(&path, range) {
            Ok(framing) => (status, headers, framing),
            Err(_) => return plain(StatusCode::NOT_FOUND, "Not Found", false),
        },
        Reply::Opened {
            status,
            headers,
            file,
            len,
        } => (
            status,
            headers,
            Framing::File {
                file,
                remaining: len,
            },
        ),
    };
    let mut response = Response::new(ResponseBody::new(framing, Some(guard)));
    *response.status_mut() = status;
    *response.headers_mut() = headers.into_map(status);
    response
}

/// Opened on the runtime thread, as the body is read (body.rs says why).
pub(super) fn open_file(
    path: &std::path::Path,
    range: Option<(u64, u64)>,
) -> std::io::Result<Framing> {
    use std::io::Seek;
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        // A directory opens on Linux and fails only when read, after the head.
        return Err(std::io::ErrorKind::NotFound.into());
    }
    let size = meta.len();
    let (start, end) = match range {
        Some((start, end)) => (start.min(size), end.min(size)),
        None => (0, size),
    };
    if start > 0 {
        file.seek(SeekFrom::Start(start))?;
    }
    Ok(Framing::File {
        file,
        remaining: end.saturating_sub(start),
    })
}

/// The fields the server adds to every response: Server, and Alt-Svc
/// except over HTTP/3 (`on_h3`), whose client is there already.
fn with_server(
    mut response: Response<ResponseBody>,
    config: &super::config::ServerConfig,
    on_h3: bool,
) -> Response<ResponseBody> {
    let headers = response.headers_mut();
    if let Some(value) = &config.server_header {
        if !headers.contains_key(SERVER) {
            headers.insert(SERVER, value.clone());
        }
    }
    if let Some(value) = config.alt_svc.as_ref().filter(|_| !on_h3) {
        if !headers.contains_key(hyper::header::ALT_SVC) {
            headers.insert(hyper::header::ALT_SVC, value.clone());
        }
    }
    response
}

#[cfg(test)]
#[path = "upgrade_tests.rs"]
mod upgrade_tests;
