//! One in-memory connection for the fuzz targets (native/fuzz) and the
//! connection tests: the bytes go through the real path (sniff, strict_io,
//! hyper's HTTP/1.1 or HTTP/2, the service, the reply) with a small echo app
//! in Rust in place of Python. Built for tests and with the `fuzzing`
//! feature; time is paused, so timeouts fire at once instead of stalling.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{HeaderMap, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::config::{Http2Config, HttpMode, RuntimeMode, ServerConfig};
use super::connection::{serve, Builders, Proto};
use super::exchange::{ConnInfo, Dispatch, Exchange, ExchangeBody, Reply};
use super::runtime::Shared;
use super::websocket::{WsAnswer, WsConfig, WsExchange};

/// What a fuzz input may make the echo app hold, so a run stays small.
const ECHO_LIMIT: usize = 64 * 1024;

/// Answers every request with its body (up to ECHO_LIMIT) and refuses
/// WebSocket upgrades after the handshake checks ran.
struct Echo;

impl Dispatch for Echo {
    fn dispatch(&self, exchange: Exchange) {
        let Exchange { body, reply, .. } = exchange;
        reply.runtime().clone().spawn(async move {
            let mut echoed = Vec::new();
            match body {
                ExchangeBody::Incoming(mut body) => {
                    while let Some(frame) = body.frame().await {
                        let Ok(frame) = frame else { break };
                        if let Ok(data) = frame.into_data() {
                            let room = ECHO_LIMIT.saturating_sub(echoed.len());
                            echoed.extend_from_slice(&data[..data.len().min(room)]);
                        }
                    }
                }
                ExchangeBody::Whole(data) => {
                    echoed.extend_from_slice(&data[..data.len().min(ECHO_LIMIT)])
                }
                ExchangeBody::Cut => {}
            }
            reply.send(Reply::Full {
                status: StatusCode::OK,
                headers: HeaderMap::new(),
                body: Bytes::from(echoed),
            });
        });
    }

    fn dispatch_ws(&self, exchange: WsExchange) {
        let _ = exchange
            .answer
            .send(WsAnswer::Refuse(StatusCode::FORBIDDEN));
    }
}

/// The worker's defaults, with small bodies so that limits are reached.
pub(crate) fn config(http: HttpMode) -> ServerConfig {
    ServerConfig {
        limit_concurrency: 0,
        backpressure: 0,
        max_connections: 0,
        max_requests: 0,
        threads: 1,
        mode: RuntimeMode::St,
        header_timeout: Some(Duration::from_secs(10)),
        send_timeout: Some(Duration::from_secs(30)),
        keepalive: Some(Duration::from_secs(5)),
        limit_request_line: 4094,
        limit_request_fields: 100,
        limit_request_field_size: 8190,
        limit_request_body: 1 << 20,
        date_header: false,
        server_header: None,
        scheme: "http",
        http,
        http2: Http2Config::default(),
        tls: None,
        proxy: None,
        ws: Some(WsConfig {
            max_size: 1 << 16,
            ping_interval: None,
            ping_timeout: None,
        }),
    }
}

/// Serves `input` as one client's bytes, written in pieces of `piece` bytes
/// (at least 1), and returns everything the server wrote back.
pub fn serve_bytes(input: &[u8], piece: usize, http: HttpMode) -> Vec<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(exchange_bytes(input, piece.max(1), http))
}

async fn exchange_bytes(input: &[u8], piece: usize, http: HttpMode) -> Vec<u8> {
    let cfg = config(http);
    let (_stop_tx, stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        http: Builders::new(&cfg),
        tls: None,
        config: cfg,
        dispatch: Box::new(Echo),
        room: None,
        app_permits: None,
        counters: Arc::default(),
        stopping: Default::default(),
        stop_rx: stop_rx.clone(),
    });
    let (client, server) = tokio::io::duplex(256 * 1024);
    let conn = ConnInfo::new("127.0.0.1:1".into(), "127.0.0.1:2".into(), "http");
    let proto = Proto::pick(http, None);
    let served = tokio::spawn(serve(server, conn, shared, stop_rx, proto));
    let (mut read, mut write) = tokio::io::split(client);
    let reader = tokio::spawn(async move {
        let mut answer = Vec::new();
        let _ = read.read_to_end(&mut answer).await;
        answer
    });
    for part in input.chunks(piece) {
        if write.write_all(part).await.is_err() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let _ = write.shutdown().await;
    // Paused time: every timer the connection waits on fires as soon as
    // nothing else can run, so this ends however the input leaves things.
    let _ = tokio::time::timeout(Duration::from_secs(3600), served).await;
    drop(write);
    reader.await.unwrap_or_default()
}
