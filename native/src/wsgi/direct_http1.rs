//! HTTP/1.1 for WSGI on the engine, without hyper: the connection's bytes go
//! through `h1::parse_request` once (the Python workers' parser, so their
//! limits, statuses and strictness), the environ is filled from that head,
//! the response head is `h1::ResponseHeadBuilder`'s (the Python workers'
//! framing), and head and body leave in one write. hyper parsed every head a
//! second time, after precheck_io.rs had, built a header map both ways and
//! wrote through its own buffers: half the time of a small request.
//!
//! The timeouts are the other workers': a new connection's first request
//! within `header_timeout` (then `keepalive` between requests), each head
//! complete within `header_timeout` of its first byte (408), each wait for
//! more body within `body_timeout` (408). On a graceful stop a response says
//! `Connection: close`, and a connection waiting for its next request is
//! closed once it has been quiet for the grace (IDLE_GRACE_ON_STOP).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::direct_response::{frame, send_file, stream, write_block};
use super::dispatch::{Call, Engine, Produced};
use super::spool::{RequestBody, Spool, SPOOL_AT};
use crate::http1_codec::{ChunkedDecoder, RequestHead, ResponseHead, Version};
use crate::py::repeats::Repeats;
use crate::server::direct_wire::{Stop, Target, Wire};
use crate::server::{answer_itself, BoxIo, ConnInfo, Shared};

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

pub(super) struct Conn {
    wire: Wire,
    /// The environ keys of this connection (`Engine::connection_environ`),
    /// made at its first request.
    environ: Option<Py<PyDict>>,
    /// The values of its last request (py/repeats.rs).
    repeats: Repeats,
    /// On the work-stealing runtime (`--threads` > 1): see `after_this_turn`.
    shares_threads: bool,
}

pub(super) async fn serve(
    engine: Arc<Engine>,
    io: BoxIo,
    conn: Arc<ConnInfo>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let mut c = Conn {
        wire: Wire::new(io, &conn, stop),
        environ: None,
        repeats: Repeats::kept(),
        shares_threads: tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread,
    };
    let cfg = &shared.config;
    let linger = loop {
        if !c.wire.next_request(cfg).await {
            break false;
        }
        let head = match c.wire.read_head(&shared).await {
            Ok((head, n)) => {
                c.wire.buf.advance(n);
                head
            }
            Err(Stop::Close) => break false,
            Err(Stop::Refuse(status, reason)) => {
                c.wire.refuse(status, &reason, true).await;
                break true;
            }
        };
        if shared.may_answer_itself(&head) {
            // Boxed: the rare path's future is not carried by every request.
            if let Some(kept) = Box::pin(answer_itself(&mut c.wire, &head, &conn, &shared)).await {
                if !kept {
                    break true;
                }
                continue;
            }
        }
        let body = match c.read_body(&head, &shared, engine.body_timeout()).await {
            Ok(body) => body,
            Err(Stop::Close) => break false,
            Err(Stop::Refuse(status, reason)) => {
                let is_head = head.method() == b"HEAD";
                c.wire.refuse(status, &reason, !is_head).await;
                break true;
            }
        };
        let ordinal = shared.counters.begin_request();
        let answer = run_app(&engine, &mut c, &head, &conn, body, &shared, ordinal);
        drop(head); // not held across the writes: the future stays small
        let kept = write_answer(&engine, &mut c, answer, &shared).await;
        shared.counters.end_request();
        if !kept {
            break !c.wire.buf.is_empty();
        }
    };
    c.wire.close(linger).await;
    if let Some(environ) = c.environ.take() {
        let repeats = std::mem::take(&mut c.repeats);
        Python::attach(|_| drop((environ, repeats)));
    }
}

impl Conn {
    /// The whole body (the engine calls the app with it in hand); past
    /// `SPOOL_AT` it goes to a temporary file as it arrives.
    async fn read_body(
        &mut self,
        head: &RequestHead,
        shared: &Shared,
        idle: Option<Duration>,
    ) -> Result<RequestBody, Stop> {
        let limit = shared.config.limit_request_body;
        let length = head.content_length.unwrap_or(0);
        if !head.chunked && length == 0 {
            return Ok(RequestBody::empty());
        }
        if !head.chunked && limit != 0 && length > limit {
            return Err(Stop::Refuse(
                413,
                format!("Request body larger than {limit} bytes"),
            ));
        }
        if head.expect_continue && head.version == Version::Http11 {
            let _ = self.wire.io.write_all(CONTINUE).await;
        }
        if !head.chunked && length <= SPOOL_AT as u64 {
            let length = length as usize;
            while self.wire.buf.len() < length {
                self.wire.more(idle).await?;
            }
            return Ok(RequestBody::Memory(self.wire.buf.split_to(length).freeze()));
        }
        let mut spool = Spool::default();
        if !head.chunked {
            let mut left = length;
            loop {
                let n = left.min(self.wire.buf.len() as u64) as usize;
                spool.push(&self.wire.buf[..n]).map_err(not_stored)?;
                self.wire.buf.advance(n);
                left -= n as u64;
                if left == 0 {
                    return Ok(spool.finish());
                }
                self.wire.more(idle).await?;
            }
        }
        let mut decoder = ChunkedDecoder::new(limit);
        let mut payload = Vec::new();
        loop {
            if !self.wire.buf.is_empty() {
                let data = self.wire.buf.split();
                if let Err(e) = decoder.feed(&data, &mut payload) {
                    return Err(Stop::Refuse(e.status, e.reason.to_string()));
                }
                spool.push(&payload).map_err(not_stored)?;
                payload.clear();
                if decoder.done() {
                    // What came after the body is the next request.
                    self.wire.buf.extend_from_slice(decoder.leftover());
                    return Ok(spool.finish());
                }
            }
            self.wire.more(idle).await?;
        }
    }
}

/// Lets the other connections that are ready in this turn of the runtime
/// run their apps before this response leaves, so that one turn's responses
/// leave together, as bjoern's do (it writes on its loop's next iteration).
/// A write wakes its reader; to a client or proxy on the same host, one
/// written an app call after the last finds it asleep again, and waking it
/// across cores cost this thread 1-2 µs of `sock_def_readable` per request
/// (perf, wrk -c128 on get-4b: 1.28x the requests with the wait). With one
/// connection open nothing can join, and the wait would only cost a turn.
///
/// On the work-stealing runtime (`--threads` > 1) an app call holds its
/// thread, and `yield_now` waits until this thread has nothing else to run:
/// a quick response waited out a slow app called after it on the same
/// thread. There the response goes to the back of the run queue instead,
/// where an idle thread takes it (`make_way`).
async fn after_this_turn(shared: &Shared, shares_threads: bool) {
    if shared.counters.open() <= 1 {
        return;
    }
    if shares_threads {
        crate::server::make_way().await;
    } else {
        tokio::task::yield_now().await;
    }
}

/// What the app made of one request, for `write_answer`: kept apart from
/// the app call, so that the future awaited per request holds only this and
/// the writes (the whole of it was 1.2 KiB, copied into the connection's
/// future for every request).
struct Answer {
    /// Still needed for what is sent after the head: the access log waits.
    call: Option<Call>,
    produced: Produced,
    /// The response head; None when the answer is an error status instead.
    framed: Option<ResponseHead>,
    is_head: bool,
}

/// Runs the app in one GIL hold: the environ, the app, the head, the access
/// log of a whole response, and dropping the request's Python objects.
fn run_app(
    engine: &Arc<Engine>,
    c: &mut Conn,
    head: &RequestHead,
    conn: &ConnInfo,
    body: RequestBody,
    shared: &Shared,
    ordinal: u64,
) -> Answer {
    let target = Target::of(head, &shared.config);
    let _busy = engine.clock.enter();
    Python::attach(|py| {
        let environ = match &c.environ {
            Some(base) => Ok(base.bind(py).clone()),
            None => engine.connection_environ(py, conn),
        }
        .and_then(|base| {
            let environ = engine.environ(&base, head, body, &mut c.repeats);
            c.environ.get_or_insert_with(|| base.unbind());
            environ
        });
        let (call, produced) = engine.run(py, environ, engine.proxied(head));
        let target = Target {
            keep_alive: target.keep_alive && !shared.closes_after(ordinal),
            ..target
        };
        let (known, file) = match &produced {
            Produced::Whole(b) => (Some(b.len() as u64), false),
            Produced::File(_, len) => (Some(*len), true),
            _ => (None, false),
        };
        let framed = match (&call, &produced) {
            (_, Produced::Error | Produced::BadProxy) | (None, _) => None,
            (Some(call), _) => frame(py, engine, call, target, known, file),
        };
        let call = match (call, &produced, &framed) {
            (Some(c), Produced::Whole(body), Some(f)) => {
                let status = c.start.borrow(py).code;
                engine.done(py, &c, status, f.body_bytes(body.len()) as u64);
                None
            }
            (Some(c), _, None) => {
                engine.done(py, &c, 500, 0);
                None
            }
            (call, _, _) => call,
        };
        Answer {
            call,
            produced,
            framed,
            is_head: target.is_head,
        }
    })
}

/// Writes what the app made; true when the connection may carry another
/// request.
async fn write_answer(engine: &Arc<Engine>, c: &mut Conn, answer: Answer, shared: &Shared) -> bool {
    let Answer {
        call,
        produced,
        framed,
        is_head,
    } = answer;
    let Some(framed) = framed else {
        let (status, text) = match produced {
            Produced::BadProxy => (400, "Contradictory scheme headers"),
            _ => (500, ""),
        };
        c.wire.refuse(status, text, !is_head).await;
        return false;
    };
    let kept = match produced {
        Produced::Whole(body) => {
            let n = framed.body_bytes(body.len());
            after_this_turn(shared, c.shares_threads).await;
            let ok = c.wire.write([&framed.bytes, &body[..n]]).await.is_ok();
            ok && framed.keep_alive && framed.complete(n as u64)
        }
        Produced::File(file, len) => {
            let call = call.expect("a file answer has a call");
            after_this_turn(shared, c.shares_threads).await;
            let sending = send_file(&mut c.wire, &framed, file, len, engine.sendfile);
            let sent = Box::pin(sending).await;
            let ok = sent.is_ok();
            let sent = sent.unwrap_or(0);
            Python::attach(|py| {
                let status = call.start.borrow(py).code;
                engine.done(py, &call, status, sent);
                drop(call);
            });
            // A Content-Length past the file's end: the client waits for
            // bytes that never come, so the connection cannot go on.
            ok && framed.keep_alive && framed.complete(sent)
        }
        Produced::Stream(pump, first) => {
            let call = call.expect("a streamed answer has a call");
            Box::pin(stream(engine, &mut c.wire, &framed, call, pump, first)).await
        }
        Produced::Cut(written) => {
            let call = call.expect("a cut answer has a call");
            Box::pin(write_cut(engine, &mut c.wire, &framed, call, written)).await;
            false
        }
        Produced::Error | Produced::BadProxy => false,
    };
    kept
}

/// What the app wrote before it failed, then the end of the connection (the
/// client must not take a cut body for a whole one). Rare: boxed by its
/// caller, so that its writes do not grow every request's future.
async fn write_cut(
    engine: &Arc<Engine>,
    wire: &mut Wire,
    framed: &ResponseHead,
    call: Call,
    written: Vec<bytes::Bytes>,
) {
    let _ = wire.write([&framed.bytes]).await;
    let mut sent = 0;
    for block in &written {
        if write_block(wire, framed, block).await.is_err() {
            break;
        }
        sent += block.len() as u64;
    }
    Python::attach(|py| {
        let status = call.start.borrow(py).code;
        engine.done(py, &call, status, sent);
        drop(call);
    });
}

/// The body could not go to its temporary file (a full disk, TMPDIR gone).
fn not_stored(e: io::Error) -> Stop {
    Stop::Refuse(500, format!("Request body could not be stored: {e}"))
}
