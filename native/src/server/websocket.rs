//! WebSocket handshakes: which requests open a session (an HTTP/1.1 upgrade,
//! RFC 6455, or an HTTP/2 extended CONNECT, RFC 8441), the handshake checks,
//! and the answer the app gives through the dispatcher (accept, or refuse
//! with an HTTP status). Once accepted, the session itself runs in
//! `ws_session.rs`, the same for both: over HTTP/2 it is one stream, and the
//! connection goes on carrying other streams beside it.
//!
//! Rules (the asgi worker's where RFC 6455 leaves room): an upgrade request
//! naming a `Sec-WebSocket-Version` other than 13 is 426 with
//! `Sec-WebSocket-Version: 13` (RFC 6455 4.2.2); a missing or malformed key,
//! a missing or repeated version, a method other than GET or HTTP/1.0 is 400
//! (4.2.1); none of them reaches the app. Over HTTP/2 there is no key and no
//! accept value (RFC 8441 5), the version rule is the same, and an accepted
//! session is a 200 instead of a 101. During a graceful stop, or when the app
//! has not answered within `HANDSHAKE_TIMEOUT`: 503.

use std::sync::Arc;
use std::time::Duration;

use hyper::ext::Protocol;
use hyper::header::{
    HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION,
    UPGRADE,
};
use hyper::http::request::Parts;
use hyper::upgrade::OnUpgrade;
use hyper::{HeaderMap, Method, Response, StatusCode, Version};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::body::plain;
use super::body::{ExchangeGuard, Framing, ResponseBody};
use super::exchange::{ConnInfo, Tracker};
use super::shared::Shared;
use super::ws_session::{self, WsAccept};

/// The app's time to accept or refuse before the client gets 503.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// A valid upgrade request handed to the dispatcher. Exactly one answer
/// goes back through `answer`; dropping it unanswered is a 500.
pub struct WsExchange {
    pub head: Parts,
    pub conn: Arc<ConnInfo>,
    pub answer: oneshot::Sender<WsAnswer>,
    pub runtime: tokio::runtime::Handle,
    /// Over when the handshake was refused (by the app or the server: stop,
    /// timeout, client gone) or the session ended.
    pub tracker: Arc<Tracker>,
}

pub enum WsAnswer {
    /// Not upgraded: this HTTP status, and the connection closes.
    Refuse(StatusCode),
    /// Not upgraded: the app's own response (ASGI's denial response).
    Respond {
        status: StatusCode,
        headers: HeaderMap,
        body: bytes::Bytes,
    },
    Accept(WsAccept),
}

fn has_token(headers: &HeaderMap, name: hyper::header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// A WebSocket upgrade request: `Connection` lists `upgrade` and `Upgrade`
/// lists `websocket` (the same test the Python parser makes).
pub fn is_upgrade(head: &Parts) -> bool {
    has_token(&head.headers, CONNECTION, "upgrade")
        && has_token(&head.headers, UPGRADE, "websocket")
}

/// An HTTP/2 stream opened for a WebSocket: CONNECT with `:protocol`
/// `websocket` (RFC 8441 4), which the server allows once it advertised
/// SETTINGS_ENABLE_CONNECT_PROTOCOL (connection.rs).
pub fn is_h2_connect(head: &Parts) -> bool {
    head.version == Version::HTTP_2
        && head.method == Method::CONNECT
        && head
            .extensions
            .get::<Protocol>()
            .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
}

/// An extended CONNECT for a protocol other than WebSocket: nothing here
/// speaks it.
pub fn is_other_h2_protocol(head: &Parts) -> bool {
    head.extensions.get::<Protocol>().is_some() && !is_h2_connect(head)
}

/// How a valid handshake is answered.
#[derive(Debug)]
pub enum Handshake {
    /// HTTP/1.1: 101, with this `Sec-WebSocket-Accept`.
    Upgrade(String),
    /// HTTP/2: 200, and the stream carries the frames.
    Connect,
}

/// 16 bytes in base64: 22 characters of the alphabet and "==".
fn valid_key(key: &[u8]) -> bool {
    let key = key.trim_ascii();
    key.len() == 24
        && key.ends_with(b"==")
        && key[..22]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

/// A handshake refused before the app sees it.
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub reason: &'static str,
}

impl Refusal {
    pub fn response(&self) -> Response<ResponseBody> {
        let mut r = plain(self.status, self.reason, true);
        if self.status == StatusCode::UPGRADE_REQUIRED {
            r.headers_mut()
                .insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        }
        r
    }
}

/// How the handshake is answered, or why it is refused. `head` is an
/// upgrade request (`is_upgrade`) or an extended CONNECT (`is_h2_connect`).
pub fn check(head: &Parts) -> Result<Handshake, Refusal> {
    let bad = |reason| {
        Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            reason,
        })
    };
    let handshake = if head.version == Version::HTTP_2 {
        if !is_h2_connect(head) {
            return bad("A WebSocket over HTTP/2 is an extended CONNECT");
        }
        Handshake::Connect
    } else {
        if head.method != Method::GET || head.version != Version::HTTP_11 {
            return bad("A WebSocket handshake is a GET over HTTP/1.1");
        }
        let keys: Vec<_> = head.headers.get_all(SEC_WEBSOCKET_KEY).iter().collect();
        if keys.len() != 1 || !valid_key(keys[0].as_bytes()) {
            return bad("Invalid Sec-WebSocket-Key");
        }
        Handshake::Upgrade(derive_accept_key(keys[0].as_bytes().trim_ascii()))
    };
    // Missing or repeated: a malformed handshake (400); one other version: 426.
    let versions: Vec<_> = head.headers.get_all(SEC_WEBSOCKET_VERSION).iter().collect();
    if versions.len() != 1 {
        return bad("One Sec-WebSocket-Version is required");
    }
    if versions[0].as_bytes().trim_ascii() != b"13" {
        return Err(Refusal {
            status: StatusCode::UPGRADE_REQUIRED,
            reason: "Sec-WebSocket-Version must be 13",
        });
    }
    Ok(handshake)
}

/// Hands a checked handshake to the app and answers with what it decided:
/// 101 or 200 (the session then runs on this runtime) or its HTTP status.
pub async fn upgrade(
    mut head: Parts,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
    handshake: Handshake,
) -> Response<ResponseBody> {
    // Over HTTP/1.1 the connection ends with a refused handshake; over HTTP/2
    // only the stream does.
    let h1 = matches!(handshake, Handshake::Upgrade(_));
    let unavailable = || plain(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable", h1);
    let mut stop = shared.stop_rx.clone();
    if *stop.borrow() {
        // A kept-alive connection upgrading while the worker stops: the new
        // session would only be closed with 1012 at once.
        return unavailable();
    }
    let Some(on_upgrade) = head.extensions.remove::<OnUpgrade>() else {
        return plain(StatusCode::BAD_REQUEST, "Bad Request", h1);
    };
    if !h1 {
        // The app sees the session an HTTP/1.1 client would open (a GET),
        // with http_version "2": CONNECT is only how HTTP/2 spells it.
        head.method = Method::GET;
    }
    // The whole session is one exchange: in flight until it ends, then one
    // request for max_requests.
    let tracker = Arc::new(Tracker::default());
    let guard = ExchangeGuard::new(tracker.clone(), shared.counters.clone(), conn.clone());
    let (tx, rx) = oneshot::channel();
    shared.dispatch.dispatch_ws(WsExchange {
        head,
        conn,
        answer: tx,
        runtime: tokio::runtime::Handle::current(),
        tracker,
    });
    let answer = tokio::select! {
        answer = rx => answer.ok(),
        _ = stop.wait_for(|s| *s) => return unavailable(),
        _ = tokio::time::sleep(HANDSHAKE_TIMEOUT) => return unavailable(),
    };
    match answer {
        Some(WsAnswer::Accept(mut accept)) => {
            let extra = std::mem::take(&mut accept.headers);
            tokio::spawn(ws_session::run(
                on_upgrade,
                accept,
                shared.clone(),
                guard,
                h1,
            ));
            let mut r = Response::new(ResponseBody::new(Framing::Empty, None));
            *r.headers_mut() = extra;
            if let Handshake::Upgrade(accept_key) = handshake {
                *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                let h = r.headers_mut();
                h.insert(UPGRADE, HeaderValue::from_static("websocket"));
                h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
                if let Ok(v) = HeaderValue::from_str(&accept_key) {
                    h.insert(SEC_WEBSOCKET_ACCEPT, v);
                }
            }
            r
        }
        Some(WsAnswer::Refuse(status)) => {
            plain(status, status.canonical_reason().unwrap_or(""), h1)
        }
        Some(WsAnswer::Respond {
            status,
            mut headers,
            body,
        }) => {
            if h1 {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            let framing = if body.is_empty() {
                Framing::Empty
            } else {
                Framing::Full(Some(body))
            };
            let mut r = Response::new(ResponseBody::new(framing, None));
            *r.status_mut() = status;
            *r.headers_mut() = headers;
            r
        }
        // The answerer dropped the session (it logs why).
        None => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            h1,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(extra: &[(&str, &str)]) -> Parts {
        let mut b = hyper::Request::builder().method("GET").uri("/ws");
        for (n, v) in extra {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    const KEY: (&str, &str) = ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    const V13: (&str, &str) = ("sec-websocket-version", "13");

    #[test]
    fn upgrade_needs_both_tokens() {
        assert!(is_upgrade(&head(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket")
        ])));
        assert!(!is_upgrade(&head(&[("upgrade", "websocket")])));
        assert!(!is_upgrade(&head(&[
            ("connection", "upgrade"),
            ("upgrade", "h2c")
        ])));
    }

    #[test]
    fn valid_handshake_gives_the_rfc_accept_value() {
        // RFC 6455 1.3's example.
        let Ok(Handshake::Upgrade(accept)) = check(&head(&[KEY, V13])) else {
            panic!("an HTTP/1.1 upgrade");
        };
        assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    fn h2_connect(protocol: Option<&'static str>, extra: &[(&str, &str)]) -> Parts {
        let mut h = head(extra);
        h.method = Method::CONNECT;
        h.version = Version::HTTP_2;
        if let Some(p) = protocol {
            h.extensions.insert(Protocol::from_static(p));
        }
        h
    }

    #[test]
    fn h2_extended_connect_needs_no_key_but_the_version() {
        let h = h2_connect(Some("websocket"), &[V13]);
        assert!(is_h2_connect(&h) && !is_other_h2_protocol(&h));
        assert!(matches!(check(&h), Ok(Handshake::Connect)));
        let r = check(&h2_connect(Some("websocket"), &[])).unwrap_err();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let h = h2_connect(Some("websocket"), &[("sec-websocket-version", "8")]);
        assert_eq!(check(&h).unwrap_err().status, StatusCode::UPGRADE_REQUIRED);
    }

    #[test]
    fn h2_connect_for_another_protocol_is_not_a_websocket() {
        let h = h2_connect(Some("webtransport"), &[V13]);
        assert!(!is_h2_connect(&h) && is_other_h2_protocol(&h));
        let h = h2_connect(None, &[V13]);
        assert!(!is_h2_connect(&h) && !is_other_h2_protocol(&h));
    }

    #[test]
    fn other_version_is_426_and_names_13_missing_is_400() {
        let r = check(&head(&[KEY, ("sec-websocket-version", "8")])).unwrap_err();
        assert_eq!(r.status, StatusCode::UPGRADE_REQUIRED);
        assert_eq!(r.response().headers()[SEC_WEBSOCKET_VERSION], "13");
        let r = check(&head(&[KEY])).unwrap_err();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn bad_keys_are_400() {
        for key in [
            "",
            "not-a-key",
            "dGhlIHNhbXBsZSBub25jZQ=",
            "dGhlIHNhbXBsZSBub25jZQ!=",
        ] {
            let r = check(&head(&[("sec-websocket-key", key), V13])).unwrap_err();
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{key:?}");
        }
        let r = check(&head(&[KEY, KEY, V13])).unwrap_err();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn only_get_over_http11() {
        let mut h = head(&[KEY, V13]);
        h.method = Method::POST;
        assert_eq!(check(&h).unwrap_err().status, StatusCode::BAD_REQUEST);
        let mut h = head(&[KEY, V13]);
        h.version = Version::HTTP_10;
        assert_eq!(check(&h).unwrap_err().status, StatusCode::BAD_REQUEST);
    }
}
