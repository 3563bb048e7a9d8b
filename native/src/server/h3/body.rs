//! A request body on its HTTP/3 stream, read as an `http_body::Body`. h3
//! checks the frames; what RFC 9114 4.1.2 leaves to the server is that the
//! DATA frames add up to the Content-Length when one is given (a request
//! that says 10 bytes and sends 11, or ends at 9, is malformed).

use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use hyper::body::{Frame, SizeHint};

use crate::server::incoming::IncomingError;

type RecvHalf = RequestStream<h3_quinn::RecvStream, Bytes>;

enum Stage {
    Data,
    Trailers,
    Done,
}

pub struct RequestBody {
    stream: RecvHalf,
    /// The Content-Length, when the request gave one.
    declared: Option<u64>,
    received: u64,
    stage: Stage,
    /// The client's side of the stream has ended and all of it was read.
    at_end: bool,
}

impl RequestBody {
    pub(super) fn new(stream: RecvHalf, declared: Option<u64>) -> Self {
        // A declared empty body is over before it is read: the bridge and
        // the WSGI engine then skip the read altogether.
        let stage = if declared == Some(0) {
            Stage::Done
        } else {
            Stage::Data
        };
        RequestBody {
            stream,
            declared,
            received: 0,
            stage,
            at_end: false,
        }
    }

    pub fn is_end_stream(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    pub fn size_hint(&self) -> SizeHint {
        match (&self.stage, self.declared) {
            (Stage::Done, _) => SizeHint::with_exact(0),
            (_, Some(n)) => SizeHint::with_exact(n.saturating_sub(self.received)),
            _ => SizeHint::default(),
        }
    }

    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, IncomingError>>> {
        loop {
            match self.stage {
                Stage::Done => return Poll::Ready(None),
                Stage::Data => match self.stream.poll_recv_data(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(Some(mut chunk))) => {
                        let data = chunk.copy_to_bytes(chunk.remaining());
                        self.received += data.len() as u64;
                        if self.declared.is_some_and(|n| self.received > n) {
                            return self.fail(IncomingError::H3Malformed);
                        }
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    Poll::Ready(Ok(None)) => {
                        self.at_end = true;
                        if self.declared.is_some_and(|n| self.received != n) {
                            return self.fail(IncomingError::H3Malformed);
                        }
                        self.stage = Stage::Trailers;
                    }
                    Poll::Ready(Err(_)) => return self.fail(IncomingError::H3Cut),
                },
                Stage::Trailers => {
                    return match self.stream.poll_recv_trailers(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(Ok(Some(trailers))) => {
                            self.stage = Stage::Done;
                            Poll::Ready(Some(Ok(Frame::trailers(trailers))))
                        }
                        Poll::Ready(Ok(None)) => {
                            self.stage = Stage::Done;
                            Poll::Ready(None)
                        }
                        Poll::Ready(Err(_)) => self.fail(IncomingError::H3Cut),
                    }
                }
            }
        }
    }

    /// Reads what has already come of a body nobody read (a GET's empty one,
    /// usually): a stream dropped before its end is read makes quinn send
    /// STOP_SENDING, one more packet per request, for a side the client has
    /// already finished.
    fn read_out_what_came(&mut self) {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..4 {
            match self.stream.poll_recv_data(&mut cx) {
                Poll::Ready(Ok(Some(_))) => continue,
                Poll::Ready(Ok(None)) => {
                    self.at_end = true;
                    return;
                }
                _ => return,
            }
        }
    }

    fn fail(&mut self, e: IncomingError) -> Poll<Option<Result<Frame<Bytes>, IncomingError>>> {
        self.stage = Stage::Done;
        // The rest is not wanted: the client may stop sending it (and
        // nothing is to be read out at the drop).
        self.at_end = true;
        self.stream
            .stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
        Poll::Ready(Some(Err(e)))
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        if !self.at_end {
            self.read_out_what_came();
        }
    }
}
