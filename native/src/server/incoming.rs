//! A request body still on its way, whichever protocol carries it: hyper's
//! (HTTP/1.1, HTTP/2) or an HTTP/3 request stream. The readers above
//! (request_body.rs, the bridge, the adapters) see one `http_body::Body`
//! and one error type, so a new transport touches none of them.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::h3::RequestBody;

/// HTTP/3's body is boxed: inline it made this 216 bytes against hyper's
/// 40, and every exchange carried that size through each move (the
/// Exchange, the ASGI and RSGI cycles), for the rare HTTP/3 request.
pub enum Incoming {
    Hyper(hyper::body::Incoming),
    H3(Box<RequestBody>),
}

#[derive(Debug)]
pub enum IncomingError {
    Hyper(hyper::Error),
    /// An HTTP/3 body that broke its own framing (more or less data than its
    /// Content-Length), answered 400 as a bad chunked body is.
    H3Malformed,
    /// The client reset the stream or the connection went away.
    H3Cut,
}

impl IncomingError {
    /// A body the client framed wrongly (400), not one it stopped sending.
    pub fn malformed(&self) -> bool {
        match self {
            IncomingError::Hyper(e) => hyper_malformed(e),
            IncomingError::H3Malformed => true,
            IncomingError::H3Cut => false,
        }
    }
}

impl std::fmt::Display for IncomingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IncomingError::Hyper(e) => e.fmt(f),
            IncomingError::H3Malformed => {
                f.write_str("HTTP/3 body length differs from its Content-Length")
            }
            IncomingError::H3Cut => f.write_str("HTTP/3 request stream cut"),
        }
    }
}

impl std::error::Error for IncomingError {}

/// hyper reports a bad chunked coding as an `InvalidData`/`InvalidInput` I/O
/// error inside its body error; a cut connection is another I/O kind.
fn hyper_malformed(e: &hyper::Error) -> bool {
    use std::error::Error;
    e.is_parse()
        || e.source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
                )
            })
}

impl Body for Incoming {
    type Data = Bytes;
    type Error = IncomingError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, IncomingError>>> {
        match self.get_mut() {
            Incoming::Hyper(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(IncomingError::Hyper))),
            Incoming::H3(body) => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Incoming::Hyper(body) => body.is_end_stream(),
            Incoming::H3(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Incoming::Hyper(body) => body.size_hint(),
            Incoming::H3(body) => body.size_hint(),
        }
    }
}
