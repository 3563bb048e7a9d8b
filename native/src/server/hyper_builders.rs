//! hyper's HTTP/1.1 and HTTP/2 connection builders, set up once per server
//! from its config: hyper's own limits where they match ours (head size,
//! header count, HTTP/2 windows and frame sizes, the rapid-reset bounds).

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;

use super::config::ServerConfig;

/// hyper's floor for `max_buf_size`.
const MIN_BUF: usize = 8192;
/// What one connection may make us buffer for a head, whatever the limits say.
const MAX_HEAD: usize = 1024 * 1024;
/// HTTP/2 rapid reset (CVE-2023-44487): streams the client may open and
/// reset before we accept them; past it the connection gets GOAWAY.
const MAX_PENDING_ACCEPT_RESETS: usize = 20;
/// Streams we may reset for the client's protocol errors before GOAWAY.
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

type Builder = auto::Builder<TokioExecutor>;

/// The HTTP/1.1 and the HTTP/2 builder, made once per server. hyper-util's
/// (one connection type for both), never left to guess the version itself.
pub struct Builders {
    pub(super) h1: Builder,
    pub(super) h2: Builder,
}

impl Builders {
    pub fn new(cfg: &ServerConfig) -> Builders {
        let mut b = Builder::new(TokioExecutor::new());
        http1_settings(&mut b.http1(), cfg);
        http2_settings(&mut b.http2(), cfg);
        Builders {
            h1: b.clone().http1_only(),
            h2: b.http2_only(),
        }
    }
}

fn http1_settings(b: &mut auto::Http1Builder<'_, TokioExecutor>, cfg: &ServerConfig) {
    b.timer(TokioTimer::new())
        .keep_alive(cfg.keepalive.is_some())
        .header_read_timeout(cfg.header_timeout)
        .auto_date_header(cfg.date_header)
        // A client may shut its sending side once its request is out and still
        // wait for the answer (the conformance corpora do): serve it. The price:
        // a client that left is noticed when a write fails, not at its FIN
        // (unless its app waits for it: fin_watch.rs).
        .half_close(true);
    let fields = if cfg.limit_request_fields == 0 {
        32768
    } else {
        cfg.limit_request_fields
    };
    b.max_headers(fields);
    // The whole head must fit the buffer: request line + every field at its
    // limit, so that the per-field limit (checked in limits.rs) answers first.
    let field = if cfg.limit_request_field_size == 0 {
        64 * 1024
    } else {
        cfg.limit_request_field_size
    };
    let line = if cfg.limit_request_line == 0 {
        8192
    } else {
        cfg.limit_request_line
    };
    b.max_buf_size((line + 2 + fields * field).clamp(MIN_BUF, MAX_HEAD));
}

fn http2_settings(b: &mut auto::Http2Builder<'_, TokioExecutor>, cfg: &ServerConfig) {
    let h2 = &cfg.http2;
    b.timer(TokioTimer::new())
        .auto_date_header(cfg.date_header)
        .max_concurrent_streams(h2.max_concurrent_streams)
        .initial_stream_window_size(h2.initial_stream_window_size)
        .initial_connection_window_size(h2.initial_connection_window_size)
        .max_frame_size(h2.max_frame_size)
        // Also the CONTINUATION-flood bound: h2 stops buffering a header
        // block past it.
        .max_header_list_size(h2.max_header_list_size)
        .max_send_buf_size(h2.max_send_buffer_size)
        .keep_alive_interval(h2.keep_alive_interval)
        .keep_alive_timeout(h2.keep_alive_timeout)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(MAX_LOCAL_ERROR_RESETS);
    if cfg.ws.is_some() {
        // RFC 8441: WebSockets over HTTP/2 streams (websocket.rs). Advertised
        // only where the server takes WebSockets at all.
        b.enable_connect_protocol();
    }
}
