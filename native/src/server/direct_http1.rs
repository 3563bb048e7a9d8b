//! HTTP/1.1 for the bridge (RSGI, and ASGI on the engine) without hyper, for
//! the requests that make up nearly all traffic: no upgrade, no CONNECT, no
//! `Expect`, and a body of at most `SMALL_BODY` with a Content-Length. Their
//! head goes through `http1_codec` once (hyper parsed it again after precheck_io.rs, and
//! precheck_io.rs copied every byte on its way to hyper), the body is read
//! before the hand-over, and the response head is `http1_codec::ResponseHeadBuilder`'s,
//! written with its body in one `writev`.
//!
//! The first request that is not one of those (a WebSocket handshake, a
//! streamed or large upload) hands the connection to hyper with everything
//! read so far, that request's head included: hyper serves the rest of the
//! connection. The
//! switch is one way, and happens between requests, so no request is ever
//! half-served by each.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use hyper::header::HeaderValue;
use hyper::{HeaderMap, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};

use super::body::Framing;
use super::direct_wire::{Stop, Target, Wire};
use super::exchange::{ConnInfo, Exchange, ExchangeBody, Interim, Tracker, SMALL_BODY};
use super::exchange_head::ExchangeHead;
use super::health::Probed;
use super::reply::{Reply, ReplyFields};
use super::reply_batch::ReplySlot;
use super::send_file::SendFile;
use super::shared::Shared;
use crate::http1_codec::{self, ChunkSize, RequestHead, ResponseHead, ResponseHeadBuilder};
use crate::static_files::{StaticBody, StaticRequest};

const FILE_CHUNK: usize = 256 * 1024;

/// The connection's stream, whatever lies under it (TCP, unix, TLS): not
/// boxed, so that hyper gets the same concrete stream after a hand-over.
pub(crate) trait Io: AsyncRead + AsyncWrite + SendFile + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + SendFile + Unpin + Send + 'static> Io for T {}

/// The stream and the bytes read from it that hyper must see first.
pub(super) type Handover<I> = (I, Bytes);

/// Serves the connection until it ends (`None`) or a request needs hyper.
pub(super) async fn serve<I: Io>(
    io: I,
    conn: Arc<ConnInfo>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Option<Handover<I>> {
    let mut w = Wire::new(io, &conn, stop);
    let linger = loop {
        match serve_app_requests(&mut w, &conn, &shared).await {
            Next::Over(linger) => break linger,
            Next::Hyper => return Some(w.into_parts()),
            Next::Itself(head, n) => {
                // Out here, and boxed: an await for these inside the app's
                // loop cost every request there about a sixth of its speed
                // (rsgi get-4b, one worker pinned), however rarely it ran.
                match Box::pin(answer_itself(&mut w, &head, &conn, &shared)).await {
                    Some(true) => w.buf.advance(n),
                    Some(false) => break true,
                    // Claimed by --static-map but not found, with
                    // --static-fallthrough: hyper's service hands it to the app.
                    None => return Some(w.into_parts()),
                }
            }
        }
    };
    w.close(linger).await;
    None
}

/// Why `serve_app_requests` returned.
enum Next {
    /// The connection is over; whether to linger (unread bytes) on close.
    Over(bool),
    /// The request at the head of the buffer needs hyper.
    Hyper,
    /// The request at the head of the buffer (`n` bytes of head) is a probe
    /// or a static file, for this loop to answer itself.
    Itself(RequestHead, usize),
}

/// The app's requests, one after the other, until one is not the app's.
async fn serve_app_requests<I: Io>(
    w: &mut Wire<I>,
    conn: &Arc<ConnInfo>,
    shared: &Arc<Shared>,
) -> Next {
    let cfg = &shared.config;
    loop {
        if !w.next_request(cfg).await {
            return Next::Over(false);
        }
        let (head, n) = match w.read_head(shared).await {
            Ok(parsed) => parsed,
            Err(Stop::Close) => return Next::Over(false),
            Err(Stop::Refuse(status, reason)) => {
                w.refuse(status, &reason, true).await;
                return Next::Over(true);
            }
        };
        if shared.may_answer_itself(&head) {
            return Next::Itself(head, n);
        }
        if !served_here(&head, shared) {
            return Next::Hyper;
        }
        w.buf.advance(n);
        let body = read_body(w, head.content_length.unwrap_or(0) as usize).await;
        let cut = matches!(body, ExchangeBody::Cut);
        let kept = exchange(w, head, body, conn, shared).await;
        if !kept || cut {
            return Next::Over(!cut && !w.buf.is_empty());
        }
    }
}

/// A probe or a static file, answered by the loop itself (this one, and
/// the WSGI engine's); `None`: the app's request. Callers ask
/// `Shared::may_answer_itself` first, which costs a comparison or two.
pub(crate) async fn answer_itself<I: Io>(
    w: &mut Wire<I>,
    h: &RequestHead,
    conn: &ConnInfo,
    shared: &Shared,
) -> Option<bool> {
    if let Some(kept) = answer_probe(w, h, conn, shared).await {
        return Some(kept);
    }
    answer_static(w, h, conn, shared).await
}

/// What the access log reads of a request a loop answers itself.
fn probed_of<'a>(h: &'a RequestHead, conn: &'a ConnInfo, t: Target) -> Probed<'a> {
    Probed {
        client: &conn.client,
        method: h.method(),
        target: h.target(),
        version: if t.http11 { "HTTP/1.1" } else { "HTTP/1.0" },
        head_only: t.is_head,
        referer: h.header(b"referer"),
        user_agent: h.header(b"user-agent"),
    }
}

/// A `--health-path` probe on a direct HTTP/1.1 loop (this one, and the
/// WSGI engine's): answered and written here (gate.rs: `Shared::probe`).
/// `None`: `h` is no probe; else whether the connection may carry another
/// request. A probe's body is never read, so one that has a body ends it.
async fn answer_probe<I: Io>(
    w: &mut Wire<I>,
    h: &RequestHead,
    conn: &ConnInfo,
    shared: &Shared,
) -> Option<bool> {
    let probe = shared.probe(h.method(), h.raw_path())?;
    let mut t = Target::of(h, &shared.config);
    t.keep_alive &= !h.chunked
        && h.content_length.unwrap_or(0) == 0
        && !shared.stopping.load(std::sync::atomic::Ordering::Acquire);
    shared.probed(probe, probed_of(h, conn, t));
    let nobody = Arc::new(Tracker::default());
    Some(write_reply(w, probe.reply(), t, &nobody).await)
}

/// A static file (`--static-map`) on a direct HTTP/1.1 loop (this one, and
/// the WSGI engine's): answered and written here, by sendfile where the
/// connection allows (gate.rs: `Shared::static_answer`). `None`: the app's
/// request; else whether the connection may carry another. Counted as a
/// request, and logged once written.
async fn answer_static<I: Io>(
    w: &mut Wire<I>,
    h: &RequestHead,
    conn: &ConnInfo,
    shared: &Shared,
) -> Option<bool> {
    let files = shared.config.static_files.as_ref()?;
    if !files.claims(h.raw_path()) {
        return None;
    }
    let answer = shared.static_answer(&StaticRequest::of(h.method(), h.raw_path(), |n| {
        h.header(n)
    }))?;
    let started = std::time::Instant::now();
    let ordinal = shared.counters.begin_request();
    let mut t = Target::of(h, &shared.config);
    // A body sent with a GET is not read: the connection ends after it.
    t.keep_alive &=
        !h.chunked && h.content_length.unwrap_or(0) == 0 && !shared.closes_after(ordinal);
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut headers = HeaderMap::with_capacity(answer.headers.len());
    for (name, value) in answer.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.append(name, value);
        }
    }
    let headers = ReplyFields::from(headers);
    let (reply, len) = match answer.body {
        StaticBody::Nothing => (
            Reply::Full {
                status,
                headers,
                body: Bytes::new(),
            },
            0,
        ),
        StaticBody::Text(text) => (
            Reply::Full {
                status,
                headers,
                body: Bytes::from_static(text.as_bytes()),
            },
            text.len() as u64,
        ),
        StaticBody::File {
            mut file,
            offset,
            len,
        } => {
            use std::io::Seek;
            // A file just opened is at 0: no seek (a system call) for it.
            if offset != 0 && file.seek(std::io::SeekFrom::Start(offset)).is_err() {
                shared.counters.end_request();
                return Some(server_error(w).await);
            }
            (
                Reply::Opened {
                    status,
                    headers,
                    file,
                    len,
                },
                len,
            )
        }
    };
    let nobody = Arc::new(Tracker::default());
    let kept = write_reply(w, reply, t, &nobody).await;
    shared.counters.end_request();
    shared.served_static(
        probed_of(h, conn, t),
        answer.status,
        len,
        started.elapsed().as_secs_f64(),
    );
    Some(kept)
}

/// Whether this loop serves the request: hyper takes the rest (an upgrade,
/// CONNECT, `Expect`, a chunked or large body). The head crosses to the
/// answerer as `http1_codec` parsed it (exchange_head.rs says why).
fn served_here(h: &RequestHead, shared: &Shared) -> bool {
    let length = h.content_length.unwrap_or(0);
    let limit = shared.config.limit_request_body;
    !(h.chunked
        || length > SMALL_BODY
        || (limit != 0 && length > limit)
        || h.asks_upgrade()
        || h.header(b"expect").is_some())
}

/// The whole (small) body; `Cut` when the client left before it came.
async fn read_body<I: Io>(w: &mut Wire<I>, length: usize) -> ExchangeBody {
    while w.buf.len() < length {
        if w.more(None).await.is_err() {
            return ExchangeBody::Cut;
        }
    }
    ExchangeBody::Whole(if length == 0 {
        Bytes::new()
    } else {
        w.buf.split_to(length).freeze()
    })
}

/// One request through the dispatcher and its reply written; true when the
/// connection may carry another request.
async fn exchange<I: Io>(
    w: &mut Wire<I>,
    head: RequestHead,
    body: ExchangeBody,
    conn: &Arc<ConnInfo>,
    shared: &Shared,
) -> bool {
    let cfg = &shared.config;
    let mut t = Target::of(&head, cfg);
    // 1xx responses are for HTTP/1.1 clients only.
    let tracker = Arc::new(if t.http11 && shared.dispatch.writes_interim() {
        Tracker::with_interim()
    } else {
        Tracker::default()
    });
    // Dropped once the reply is written (or the connection failed under it),
    // which tells the answerer the exchange is over.
    let Some(guard) = shared.let_in(tracker.clone(), conn.clone()).await else {
        let (status, text) = super::gate::BUSY;
        let nobody = Arc::new(Tracker::default());
        return write_reply(w, Reply::text(status, text, false), t, &nobody).await;
    };
    let (tx, mut rx) = oneshot::channel();
    shared.dispatch.dispatch(Exchange {
        head: ExchangeHead::Wire(head),
        body,
        conn: conn.clone(),
        reply: ReplySlot::new(tx),
        tracker: tracker.clone(),
        limit_body: cfg.limit_request_body,
    });
    // Meanwhile the client is watched, so that one that leaves gives its seat
    // up first (a read with nothing to read costs no system call).
    let reply = loop {
        let hint = tokio::select! {
            biased;
            reply = &mut rx => break reply,
            () = async {
                match tracker.interim.as_ref() {
                    Some(interim) => interim.ready().await,
                    None => std::future::pending().await,
                }
            } => true,
            () = w.watch_client() => false,
        };
        if let (true, Some(interim)) = (hint, tracker.interim.as_ref()) {
            write_interim(w, interim).await;
        }
    };
    if let Some(interim) = tracker.interim.as_ref().filter(|i| i.has_pending()) {
        // Queued just before the reply came: they still go first.
        write_interim(w, interim).await;
    }
    // The answerer dropped the request without a reply (it logs why).
    let reply = reply.unwrap_or_else(|_| Reply::server_error());
    t.keep_alive &= !shared.closes_after(guard.ordinal);
    let kept = write_reply(w, reply, t, &tracker).await;
    drop(guard);
    kept
}

/// The 1xx responses queued so far (early hints). A failed write shows again
/// when the final response is written.
async fn write_interim<I: Io>(w: &mut Wire<I>, interim: &Interim) {
    for head in interim.take() {
        if w.write([&head]).await.is_err() {
            return;
        }
    }
}

fn response_head(
    status: StatusCode,
    headers: &ReplyFields,
    t: Target,
    known: Option<u64>,
) -> Result<ResponseHead, &'static str> {
    // StatusCode is 100..=999: three digits, no formatting machinery.
    let code = status.as_u16();
    let reason = http1_codec::reason_phrase(code).as_bytes();
    let mut line = [0u8; 64];
    line[..4].copy_from_slice(&[
        b'0' + (code / 100) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
        b' ',
    ]);
    let end = 4 + reason.len().min(60);
    line[4..end].copy_from_slice(&reason[..end - 4]);
    let line = if reason.is_empty() {
        &line[..3]
    } else {
        &line[..end]
    };
    let mut b = ResponseHeadBuilder::new(line, t.http11, t.keep_alive, t.is_head)?;
    match headers {
        ReplyFields::Map(map) => {
            for (name, value) in map {
                // A HeaderName is a token and a HeaderValue has no CR, LF or
                // NUL: only what the field means is left to find.
                let (name, value) = (name.as_str().as_bytes(), value.as_bytes());
                b.checked_header(name, value, http1_codec::field_kind(name, value)?)?;
            }
        }
        // Checked and classified by the adapter already.
        ReplyFields::App(fields) => {
            for (name, value, kind) in fields.sent(code) {
                b.checked_header(name, value, kind)?;
            }
        }
    }
    Ok(b.finish_with_length(known))
}

/// Writes one reply; true when the connection may carry another request.
async fn write_reply<I: Io>(
    w: &mut Wire<I>,
    reply: Reply,
    t: Target,
    tracker: &Arc<Tracker>,
) -> bool {
    let reply = match reply {
        Reply::File {
            status,
            headers,
            path,
            range,
        } => match super::service::open_file(&path, range) {
            Ok(Framing::File { file, remaining }) => Reply::Opened {
                status,
                headers,
                file,
                len: remaining,
            },
            _ => Reply::text(StatusCode::NOT_FOUND, "Not Found", false),
        },
        other => other,
    };
    match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let Ok(head) = response_head(status, &headers, t, Some(body.len() as u64)) else {
                return server_error(w).await;
            };
            let n = head.body_bytes(body.len());
            let ok = if head.chunked() && n > 0 {
                let size = ChunkSize::new(n);
                w.write([&head.bytes, size.as_bytes(), &body[..n], b"\r\n0\r\n\r\n"])
                    .await
            } else if head.chunked() {
                w.write([&head.bytes, b"0\r\n\r\n"]).await
            } else {
                w.write([&head.bytes, &body[..n]]).await
            };
            ok.is_ok() && head.keep_alive && head.complete(n as u64)
        }
        // Opened above.
        Reply::File { .. } => false,
        Reply::Opened {
            status,
            headers,
            file,
            len,
        } => match response_head(status, &headers, t, Some(len)) {
            // Boxed, as the stream below: neither grows the future that
            // every small reply goes through (it was 2 KiB).
            Ok(head) => Box::pin(write_file(w, head, file, len)).await,
            Err(_) => server_error(w).await,
        },
        Reply::Stream {
            status,
            headers,
            chunks,
            trailers,
        } => match response_head(status, &headers, t, None) {
            Ok(head) => Box::pin(write_stream(w, head, chunks, trailers, tracker.clone())).await,
            Err(_) => server_error(w).await,
        },
    }
}

async fn server_error<I: Io>(w: &mut Wire<I>) -> bool {
    w.refuse(500, "", true).await;
    false
}

/// A regular file, read on this thread (body.rs says why), after the head.
async fn write_file<I: Io>(
    w: &mut Wire<I>,
    mut head: ResponseHead,
    mut file: std::fs::File,
    len: u64,
) -> bool {
    use std::io::Read;
    let mut left = head.body_bytes(len as usize) as u64;
    if left > 0 && !head.chunked() && w.sends_files() {
        // From the page cache to the socket (plain TCP, unix): no copy here.
        return match w.send_file(&head.bytes, &file, left).await {
            Ok(sent) => head.keep_alive && head.complete(sent),
            Err(_) => false,
        };
    }
    let mut buf = vec![0u8; (left as usize).clamp(1, FILE_CHUNK)];
    let mut pending = std::mem::take(&mut head.bytes);
    let mut sent = 0u64;
    while left > 0 {
        let want = (left as usize).min(buf.len());
        let n = match file.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break, // the file shrank: the length cannot be kept
            Ok(n) => n,
        };
        if w.write([&pending, &buf[..n]]).await.is_err() {
            return false;
        }
        pending.clear();
        sent += n as u64;
        left -= n as u64;
    }
    if !pending.is_empty() && w.write([&pending]).await.is_err() {
        return false;
    }
    head.keep_alive && head.complete(sent)
}

/// A streamed body, each chunk written as it comes (a slow client holds the
/// app's next `send` back: the channel is bounded).
async fn write_stream<I: Io>(
    w: &mut Wire<I>,
    mut head: ResponseHead,
    mut chunks: mpsc::Receiver<Bytes>,
    trailers: Option<oneshot::Receiver<HeaderMap>>,
    tracker: Arc<Tracker>,
) -> bool {
    let mut pending = std::mem::take(&mut head.bytes);
    let mut sent = 0u64;
    let mut left = head.framing.limit();
    while let Some(chunk) = chunks.recv().await {
        let n = left.map_or(chunk.len(), |l| (l as usize).min(chunk.len()));
        if n == 0 {
            continue; // no body allowed, or all of it sent: the rest is dropped
        }
        let written = if head.chunked() {
            let size = ChunkSize::new(n);
            w.write([&pending, size.as_bytes(), &chunk[..n], b"\r\n"])
                .await
        } else {
            w.write([&pending, &chunk[..n]]).await
        };
        if written.is_err() {
            return false;
        }
        pending.clear();
        sent += n as u64;
        if let Some(l) = left.as_mut() {
            *l -= n as u64;
        }
    }
    let announced = trailers.is_some();
    let trailers = match trailers {
        Some(rx) if !tracker.is_aborted() => rx.await.ok(),
        _ => None,
    };
    // Announced trailers that never came: the app failed after its body.
    if tracker.is_aborted() || (announced && trailers.is_none()) {
        // The app raised mid-stream: what it sent went out, and the close
        // (no last chunk) tells the client the body is incomplete.
        let _ = w.write([&pending]).await;
        return false;
    }
    if head.chunked() {
        pending.extend_from_slice(b"0\r\n");
        for (name, value) in trailers.iter().flatten() {
            pending.extend_from_slice(name.as_str().as_bytes());
            pending.extend_from_slice(b": ");
            pending.extend_from_slice(value.as_bytes());
            pending.extend_from_slice(b"\r\n");
        }
        pending.extend_from_slice(b"\r\n");
    }
    if w.write([&pending]).await.is_err() {
        return false;
    }
    head.keep_alive && head.complete(sent)
}
