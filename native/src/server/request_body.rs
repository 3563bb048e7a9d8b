//! A request body hyper holds, read in chunks by tasks on the connection's
//! runtime for whichever interface asked (the adapters turn a `BodyRead`
//! into what their app sees). A body over `limit_request_body` (chunked, so
//! not refused from its Content-Length) answers 413 itself and fails the
//! read; a malformed one answers 400.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body;

use super::incoming::Incoming;
use hyper::StatusCode;

use super::exchange::ConnInfo;
use super::reply::Reply;
use super::reply_batch::ReplySlot;
use crate::http1_codec::chunked::FORBIDDEN_TRAILERS;

/// What one read of a request body gave.
pub enum BodyRead {
    Data(Bytes),
    /// The body is over.
    End,
    /// Refused (413, 400; answered already): the app's read fails with this.
    Refused(&'static str),
    /// The client went away in the middle of the body.
    Cut(&'static str),
}

pub struct BodyStream {
    conn: Arc<ConnInfo>,
    body: tokio::sync::Mutex<Option<Incoming>>,
    seen: std::sync::atomic::AtomicU64,
    limit: u64,
    reply: ReplySlot,
}

const TOO_LARGE: &str = "request body larger than limit_request_body";
const INVALID: &str = "invalid request body";
const CUT: &str = "the client closed the connection while sending the body";

impl BodyStream {
    pub fn new(body: Incoming, limit: u64, reply: ReplySlot, conn: Arc<ConnInfo>) -> Arc<Self> {
        Arc::new(BodyStream {
            conn,
            body: tokio::sync::Mutex::new(Some(body)),
            seen: Default::default(),
            limit,
            reply,
        })
    }

    fn count(&self, n: usize) -> Result<(), BodyRead> {
        let seen = self
            .seen
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed)
            + n as u64;
        if self.limit != 0 && seen > self.limit {
            self.reply.send(too_large());
            return Err(BodyRead::Refused(TOO_LARGE));
        }
        Ok(())
    }

    /// Whether nothing is left to read: the end was seen, or the body's
    /// framing says no more data follows. A read in progress counts as not
    /// finished.
    pub fn finished(&self) -> bool {
        self.body
            .try_lock()
            .is_ok_and(|guard| guard.as_ref().is_none_or(|b| b.is_end_stream()))
    }

    /// The next data chunk, or `End`.
    pub async fn next(&self) -> BodyRead {
        let mut guard = self.body.lock().await;
        let Some(body) = guard.as_mut() else {
            return BodyRead::End;
        };
        loop {
            match body.frame().await {
                None => {
                    *guard = None;
                    return BodyRead::End;
                }
                Some(Err(e)) => {
                    *guard = None;
                    if e.malformed() || self.conn.body_refused() {
                        // A malformed chunked body: the client gets 400 (unless
                        // the app answered already) and the app an error.
                        self.reply
                            .send(refusal(StatusCode::BAD_REQUEST, "Invalid chunked body"));
                        return BodyRead::Refused(INVALID);
                    }
                    return BodyRead::Cut(CUT);
                }
                Some(Ok(frame)) => {
                    // Trailers are not part of RSGI: checked as `http1_codec` checks
                    // them (no framing or routing fields), then dropped.
                    let frame = match frame.into_trailers() {
                        Ok(trailers) => {
                            if trailers
                                .keys()
                                .any(|k| FORBIDDEN_TRAILERS.contains(&k.as_str().as_bytes()))
                            {
                                *guard = None;
                                self.reply.send(refusal(
                                    StatusCode::BAD_REQUEST,
                                    "Forbidden trailer field",
                                ));
                                return BodyRead::Refused(INVALID);
                            }
                            continue;
                        }
                        Err(frame) => frame,
                    };
                    if let Ok(data) = frame.into_data() {
                        if let Err(e) = self.count(data.len()) {
                            *guard = None;
                            return e;
                        }
                        if !data.is_empty() {
                            return BodyRead::Data(data);
                        }
                    }
                }
            }
        }
    }

    /// The next chunk joined with every one already received behind it, up
    /// to about `limit` bytes: one message for what arrived together (a
    /// client sending one-byte chunks must not cost one loop turn each). A
    /// broken or cut body wins over the data gathered with it.
    pub async fn next_batch(&self, limit: usize) -> BodyRead {
        use futures_util::FutureExt;
        let first = match self.next().await {
            BodyRead::Data(b) => b,
            other => return other,
        };
        let mut joined: Option<BytesMut> = None;
        let mut size = first.len();
        // hyper hands an HTTP/1.1 body over one frame at a time, decoding the
        // next once this one is taken: after a miss, one yield lets it.
        let mut yielded = false;
        while size < limit {
            match self.next().now_or_never() {
                Some(BodyRead::Data(b)) => {
                    yielded = false;
                    size += b.len();
                    joined
                        .get_or_insert_with(|| BytesMut::from(&first[..]))
                        .extend_from_slice(&b);
                }
                None if !yielded => {
                    yielded = true;
                    tokio::task::yield_now().await;
                }
                Some(BodyRead::End) | None => break,
                Some(broken) => return broken,
            }
        }
        BodyRead::Data(joined.map_or(first, BytesMut::freeze))
    }

    /// The whole body (one chunk is passed on without a copy).
    pub async fn read_all(&self) -> BodyRead {
        let mut first: Option<Bytes> = None;
        let mut rest: Option<BytesMut> = None;
        loop {
            match self.next().await {
                BodyRead::Data(b) => match (&first, &mut rest) {
                    (None, _) => first = Some(b),
                    (Some(f), None) => {
                        let mut buf = BytesMut::with_capacity(f.len() + b.len());
                        buf.extend_from_slice(f);
                        buf.extend_from_slice(&b);
                        rest = Some(buf);
                    }
                    (Some(_), Some(buf)) => buf.extend_from_slice(&b),
                },
                BodyRead::End => {
                    return BodyRead::Data(match rest {
                        Some(buf) => buf.freeze(),
                        None => first.unwrap_or_default(),
                    })
                }
                other => return other,
            }
        }
    }
}

fn too_large() -> Reply {
    refusal(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large")
}

/// A short text answer that ends the connection.
fn refusal(status: StatusCode, text: &'static str) -> Reply {
    Reply::text(status, text, true)
}
