//! The native server's settings: one dict the worker makes once
//! (`supervise/workers/native_settings.py`, from the settings registry),
//! read here into a `ServerConfig`. A key is a setting's name, or one the
//! worker derives from several (`threads`, `mode`, `ws`, `backpressure`,
//! `max_requests`, `server_header`, `proxy_allow`, `tls`). A key no arm
//! reads is refused, so a setting cannot be passed and silently ignored; a
//! key not given keeps `ServerConfig::default()`, the settings' default.

use std::path::PathBuf;
use std::time::Duration;

use hyper::header::HeaderValue;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::tls::NativeTls;
use crate::server::{HttpMode, RuntimeMode, ServerConfig, WsConfig};
use crate::static_files::StaticFiles;

/// `settings` as the server's config.
pub fn server_config(settings: &Bound<'_, PyDict>) -> PyResult<ServerConfig> {
    let mut config = ServerConfig::default();
    let mut ws = WsConfig::default();
    let mut ws_on = true;
    let mut statics = StaticSettings::default();
    for (key, value) in settings.iter() {
        let key: String = key.extract()?;
        let read = match key.as_str() {
            "ws" => value.extract().map(|on| ws_on = on),
            "ws_max_size" => value.extract().map(|n| ws.max_size = n),
            "ws_ping_interval" => seconds(&value).map(|d| ws.ping_interval = d),
            "ws_ping_timeout" => seconds(&value).map(|d| ws.ping_timeout = d),
            "static_map" => value.extract().map(|m| statics.map = m),
            "static_cache_control" => value.extract().map(|c| statics.cache_control = c),
            "static_immutable" => value.extract().map(|on| statics.immutable = on),
            "static_fallthrough" => value.extract().map(|on| statics.fallthrough = on),
            "static_follow_symlinks" => value.extract().map(|on| statics.follow_symlinks = on),
            _ => set(&mut config, &key, &value),
        };
        read.map_err(|err| PyValueError::new_err(format!("native server setting {key:?}: {err}")))?;
    }
    config.ws = ws_on.then_some(ws);
    config.static_files = statics.build()?;
    config.scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    Ok(config)
}

/// `--static-map` and the settings that go with it, read before they are
/// put together.
#[derive(Default)]
struct StaticSettings {
    /// "PREFIX=DIR" each, as the settings validated them.
    map: Vec<String>,
    cache_control: Option<String>,
    immutable: bool,
    fallthrough: bool,
    follow_symlinks: bool,
}

impl StaticSettings {
    fn build(self) -> PyResult<Option<StaticFiles>> {
        if self.map.is_empty() {
            return Ok(None);
        }
        let maps: Vec<(String, PathBuf)> = self
            .map
            .iter()
            .map(|m| match m.split_once('=') {
                Some((prefix, dir)) => Ok((prefix.to_owned(), PathBuf::from(dir))),
                None => Err(PyValueError::new_err(format!(
                    "static_map {m:?}: PREFIX=DIR"
                ))),
            })
            .collect::<PyResult<_>>()?;
        StaticFiles::new(
            &maps,
            self.cache_control,
            self.immutable,
            self.fallthrough,
            self.follow_symlinks,
        )
        .map(Some)
        .map_err(PyValueError::new_err)
    }
}

/// One setting into `config`.
fn set(config: &mut ServerConfig, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let h2 = &mut config.http2;
    match key {
        "threads" => config.threads = value.extract()?,
        "mode" => config.mode = runtime_mode(value.extract()?)?,
        "header_timeout" => config.header_timeout = seconds(value)?,
        "send_timeout" => config.send_timeout = seconds(value)?,
        "send_min_rate" => config.send_min_rate = value.extract()?,
        "keepalive" => config.keepalive = seconds(value)?,
        "limit_request_line" => config.limit_request_line = value.extract()?,
        "limit_request_fields" => config.limit_request_fields = value.extract()?,
        "limit_request_field_size" => config.limit_request_field_size = value.extract()?,
        "limit_request_body" => config.limit_request_body = value.extract()?,
        "limit_concurrency" => config.limit_concurrency = value.extract()?,
        "backpressure" => config.backpressure = value.extract()?,
        "worker_connections" => config.max_connections = value.extract()?,
        "max_requests" => config.max_requests = value.extract()?,
        "health_path" => config.health_path = value.extract()?,
        "health_access_log" => config.health_access_log = value.extract()?,
        "log_answered" => config.log_answered = value.extract()?,
        "date_header" => config.date_header = value.extract()?,
        "server_header" => config.server_header = header_value(value.extract()?)?,
        // The worker's index in the --quic-bind groups and its socket in each.
        "quic" => {
            let quic: Option<(u8, Vec<i32>)> = value.extract()?;
            config.quic = quic.map_or_else(Vec::new, |(index, fds)| {
                fds.into_iter()
                    .map(|fd| crate::server::QuicSocket { fd, index })
                    .collect()
            });
        }
        "alt_svc" => {
            let text: Option<String> = value.extract()?;
            // The direct HTTP/1.1 loops write their heads with http1_codec,
            // which holds it for the process (as it does the Server field).
            crate::http1_codec::set_alt_svc(text.as_deref().map(str::as_bytes))
                .map_err(PyValueError::new_err)?;
            config.alt_svc = header_value(text)?;
        }
        "http" => config.http = http_mode(value.extract()?)?,
        "http2_max_concurrent_streams" => h2.max_concurrent_streams = value.extract()?,
        "http2_initial_stream_window_size" => h2.initial_stream_window_size = value.extract()?,
        "http2_initial_connection_window_size" => {
            h2.initial_connection_window_size = value.extract()?
        }
        "http2_max_frame_size" => h2.max_frame_size = value.extract()?,
        "http2_max_headers_size" => h2.max_header_list_size = value.extract()?,
        "http2_max_send_buffer_size" => h2.max_send_buffer_size = value.extract()?,
        "http2_keep_alive_interval" => h2.keep_alive_interval = seconds(value)?,
        "http2_keep_alive_timeout" => {
            h2.keep_alive_timeout = seconds(value)?.unwrap_or(Duration::from_secs(20))
        }
        "tls" => {
            let tls: Option<PyRef<'_, NativeTls>> = value.extract()?;
            config.tls = tls.map(|t| t.config.clone());
        }
        // --proxy-protocol is on and these peers must send a header.
        "proxy_allow" => {
            let allow: Option<Vec<String>> = value.extract()?;
            config.proxy = allow
                .map(|items| crate::proxy::Allow::parse(&items))
                .transpose()
                .map_err(PyValueError::new_err)?;
        }
        _ => return Err(PyValueError::new_err("no such setting")),
    }
    Ok(())
}

/// Seconds as the settings give them: `None` or not above zero is "none".
fn seconds(value: &Bound<'_, PyAny>) -> PyResult<Option<Duration>> {
    let s: Option<f64> = value.extract()?;
    Ok(s.filter(|s| *s > 0.0).map(Duration::from_secs_f64))
}

fn runtime_mode(mode: &str) -> PyResult<RuntimeMode> {
    match mode {
        "st" => Ok(RuntimeMode::St),
        "mt" => Ok(RuntimeMode::Mt),
        other => Err(PyValueError::new_err(format!(
            "unknown runtime mode {other:?}"
        ))),
    }
}

fn http_mode(mode: &str) -> PyResult<HttpMode> {
    match mode {
        "auto" => Ok(HttpMode::Auto),
        "1" => Ok(HttpMode::H1),
        "2" => Ok(HttpMode::H2),
        other => Err(PyValueError::new_err(format!(
            "unknown http mode {other:?}"
        ))),
    }
}

fn header_value(text: Option<String>) -> PyResult<Option<HeaderValue>> {
    text.map(|t| HeaderValue::from_str(&t))
        .transpose()
        .map_err(|_| PyValueError::new_err("invalid Server header value"))
}
