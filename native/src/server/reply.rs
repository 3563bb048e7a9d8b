//! The answer to one request, as the app side gives it to the server.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, StatusCode};
use tokio::sync::{mpsc, oneshot};

use super::app_fields::AppFields;

/// The answer to one request.
pub enum Reply {
    Full {
        status: StatusCode,
        headers: ReplyFields,
        body: Bytes,
    },
    File {
        status: StatusCode,
        headers: ReplyFields,
        path: std::path::PathBuf,
        range: Option<(u64, u64)>,
    },
    Stream {
        status: StatusCode,
        headers: ReplyFields,
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
        headers: ReplyFields,
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
            headers: text_headers(close).into(),
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

/// A reply's fields: the server's own (and RSGI's) in hyper's map, or an
/// ASGI app's as its adapter checked them, which the direct HTTP/1.1 loop
/// writes as they are and only hyper and h3 turn into a map.
pub enum ReplyFields {
    Map(HeaderMap),
    App(AppFields),
}

impl From<HeaderMap> for ReplyFields {
    fn from(map: HeaderMap) -> Self {
        ReplyFields::Map(map)
    }
}

impl ReplyFields {
    /// The map hyper and h3 write: for an app's fields, those `AppFields::sent`
    /// lets out (its adapter refused any that the map would not hold).
    pub fn into_map(self, status: StatusCode) -> HeaderMap {
        let fields = match self {
            ReplyFields::Map(map) => return map,
            ReplyFields::App(fields) => fields,
        };
        let mut map = HeaderMap::with_capacity(fields.len());
        for (name, value, _) in fields.sent(status.as_u16()) {
            if let (Ok(name), Ok(value)) =
                (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
            {
                map.append(name, value);
            }
        }
        map
    }
}
