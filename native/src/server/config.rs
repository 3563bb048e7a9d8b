//! What the server needs from the worker's settings, in Rust types.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;

/// `--runtime-mode`: `St` runs one single-threaded runtime per thread (no
/// work stealing, no cross-thread wake-ups); `Mt` one work-stealing runtime
/// with `threads` workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMode {
    St,
    Mt,
}

/// `--http`: which protocols a connection may speak. `Auto` takes HTTP/2
/// when ALPN says h2 or, without ALPN, when the client opens with the HTTP/2
/// preface (h2c with prior knowledge); HTTP/1.1 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMode {
    Auto,
    H1,
    H2,
}

/// The HTTP/2 settings the worker exposes (the rest are hyper's defaults).
#[derive(Debug, Clone)]
pub struct Http2Config {
    pub max_concurrent_streams: u32,
    pub initial_stream_window_size: u32,
    pub initial_connection_window_size: u32,
    pub max_frame_size: u32,
    pub max_header_list_size: u32,
    pub max_send_buffer_size: usize,
    /// `None`: no keep-alive pings.
    pub keep_alive_interval: Option<Duration>,
    pub keep_alive_timeout: Duration,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            max_concurrent_streams: 200,
            initial_stream_window_size: 1 << 20,
            initial_connection_window_size: 1 << 20,
            max_frame_size: 16384,
            max_header_list_size: 64 * 1024,
            max_send_buffer_size: 400 * 1024,
            keep_alive_interval: None,
            keep_alive_timeout: Duration::from_secs(20),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub threads: usize,
    pub mode: RuntimeMode,
    pub header_timeout: Option<Duration>,
    /// `--send-timeout`: how long a write may find no room before the
    /// connection (or an HTTP/2 connection whose streams all wait for window)
    /// is dropped; `None`: no limit.
    pub send_timeout: Option<Duration>,
    /// `--send-min-rate`: bytes a second a client must take over each
    /// `send_timeout` of waits (send_pace.rs); 0: no floor.
    pub send_min_rate: u64,
    /// `None`: no keep-alive (one request per connection).
    pub keepalive: Option<Duration>,
    pub limit_request_line: usize,
    pub limit_request_fields: usize,
    pub limit_request_field_size: usize,
    /// 0: no limit.
    pub limit_request_body: u64,
    /// `--limit-concurrency`: requests in flight past which a new one is
    /// answered 503 (0: no limit).
    pub limit_concurrency: usize,
    /// `--backpressure`: requests handed to the app at once (0: no bound);
    /// the next one waits for one of them to be answered.
    pub backpressure: usize,
    /// `--worker-connections`: connections open at once (0: no limit),
    /// with the make-room rule of room.rs.
    pub max_connections: usize,
    /// `--max-requests` of this worker, jitter applied (0: none). The
    /// response to the request that reaches it, and to any after it, says
    /// `Connection: close` on HTTP/1.x, as the Python workers' last one does:
    /// the worker is about to retire, so its connections should not idle on.
    pub max_requests: u64,
    /// `--health-path` (normalised, no trailing slash); `None`: no probes.
    pub health_path: Option<String>,
    /// `--health-access-log`: probes go to the access log too.
    pub health_access_log: bool,
    /// `--static-map` and its settings; `None`: no static files.
    pub static_files: Option<crate::static_files::StaticFiles>,
    /// Whether what the server answers itself (static files) is queued for
    /// the worker's access log and metrics (`answered.rs`).
    pub log_answered: bool,
    pub date_header: bool,
    pub server_header: Option<HeaderValue>,
    /// `--quic-bind`: this worker's UDP socket in each group (server/h3);
    /// empty: no HTTP/3.
    pub quic: Vec<super::h3::QuicSocket>,
    /// `--alt-svc` (HTTP/3's advertisement, `h3=":443"; ma=86400`): added to
    /// HTTP/1.1 and HTTP/2 responses that do not carry one; `None`: none.
    pub alt_svc: Option<HeaderValue>,
    pub scheme: &'static str,
    pub http: HttpMode,
    pub http2: Http2Config,
    /// Set: every listener speaks TLS (the ALPN list is set by `Server::start`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// `None`: upgrade requests are served as plain HTTP requests (`--ws off`).
    pub ws: Option<WsConfig>,
    /// `--proxy-protocol`: the peers that must open with a PROXY header
    /// (unix-socket peers always do); `None`: the setting is off.
    pub proxy: Option<crate::proxy::Allow>,
}

/// The settings' defaults (supervise/settings*.py), so that a config
/// built by hand (tests, fuzzing) names only what it changes.
impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            threads: 1,
            mode: RuntimeMode::St,
            header_timeout: Some(Duration::from_secs(10)),
            send_timeout: Some(Duration::from_secs(30)),
            send_min_rate: 1024,
            keepalive: Some(Duration::from_secs(2)),
            limit_request_line: 4094,
            limit_request_fields: 100,
            limit_request_field_size: 8190,
            limit_request_body: 0,
            limit_concurrency: 0,
            backpressure: 0,
            max_connections: 1000,
            max_requests: 0,
            health_path: None,
            health_access_log: false,
            static_files: None,
            log_answered: false,
            date_header: true,
            server_header: Some(HeaderValue::from_static("supervise")),
            alt_svc: None,
            quic: Vec::new(),
            scheme: "http",
            http: HttpMode::Auto,
            http2: Http2Config::default(),
            tls: None,
            ws: Some(WsConfig::default()),
            proxy: None,
        }
    }
}

impl ServerConfig {
    /// The `http1_codec` parser's limits from the settings.
    pub fn limits(&self) -> crate::http1_codec::Limits {
        crate::http1_codec::Limits {
            request_line: self.limit_request_line,
            fields: self.limit_request_fields,
            field_size: self.limit_request_field_size,
        }
    }
}

/// What `--ws-max-size`, `--ws-ping-interval` and `--ws-ping-timeout` say.
#[derive(Debug, Clone)]
pub struct WsConfig {
    pub max_size: usize,
    pub ping_interval: Option<Duration>,
    pub ping_timeout: Option<Duration>,
}

impl Default for WsConfig {
    fn default() -> Self {
        WsConfig {
            max_size: 16 << 20,
            ping_interval: Some(Duration::from_secs(20)),
            ping_timeout: Some(Duration::from_secs(20)),
        }
    }
}
