//! The answer to one request, as the app side gives it to the server.

use bytes::Bytes;
use hyper::{HeaderMap, StatusCode};
use tokio::sync::{mpsc, oneshot};

/// The answer to one request.
pub enum Reply {
    Full {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    File {
        status: StatusCode,
        headers: HeaderMap,
        path: std::path::PathBuf,
        range: Option<(u64, u64)>,
    },
    Stream {
        status: StatusCode,
        headers: HeaderMap,
        chunks: mpsc::Receiver<Bytes>,
        /// The trailer fields that follow the last chunk (ASGI's
        /// `http.response.trailers`); the stream is incomplete when the
        /// sender goes without sending them.
        trailers: Option<oneshot::Receiver<HeaderMap>>,
    },
    /// `len` bytes of a file already open, from its current position (a
    /// WSGI file_wrapper).
    Opened {
        status: StatusCode,
        headers: HeaderMap,
        file: std::fs::File,
        len: u64,
    },
}

impl Reply {
    /// A short text answer from the server itself (a refusal, a 503, a 500
    /// for an answerer that failed); `close` ends the connection after it.
    pub fn text(status: StatusCode, text: &'static str, close: bool) -> Reply {
        Reply::Full {
            status,
            headers: text_headers(close),
            body: Bytes::from_static(text.as_bytes()),
        }
    }

    /// The 500 of an app that failed (or could not be started); it ends
    /// the connection.
    pub fn server_error() -> Reply {
        Reply::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            true,
        )
    }

    /// A request refused for what it says (contradictory proxy headers, as
    /// the other workers refuse them); it ends the connection.
    pub fn bad_request(text: &'static str) -> Reply {
        Reply::text(StatusCode::BAD_REQUEST, text, true)
    }

    /// A body that stopped coming for longer than `body_timeout`.
    pub fn body_timed_out() -> Reply {
        Reply::text(StatusCode::REQUEST_TIMEOUT, "Request body timed out", true)
    }
}

/// The fields of the server's own short text answers.
pub fn text_headers(close: bool) -> HeaderMap {
    use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    if close {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    headers
}
