//! What the server needs from the worker's settings, in Rust types.

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

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub threads: usize,
    pub mode: RuntimeMode,
    pub header_timeout: Option<Duration>,
    /// `None`: no keep-alive (one request per connection).
    pub keepalive: Option<Duration>,
    pub limit_request_line: usize,
    pub limit_request_fields: usize,
    pub limit_request_field_size: usize,
    /// 0: no limit.
    pub limit_request_body: u64,
    pub date_header: bool,
    pub server_header: Option<HeaderValue>,
    pub scheme: &'static str,
    /// `None`: upgrade requests are served as plain HTTP requests (`--ws off`).
    pub ws: Option<super::websocket::WsConfig>,
}
