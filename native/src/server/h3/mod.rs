//! HTTP/3: QUIC (quinn) on the UDP sockets the arbiter bound, HTTP/3
//! framing and QPACK (h3), rustls for the handshake as on TCP.
//!
//! Theory of operation. UDP has no accept: every worker of the arbiter holds
//! one socket of a SO_REUSEPORT group on the `--quic-bind` address, the one
//! at its own index, and the kernel chooses a socket for each datagram with
//! the arbiter's BPF program (supervise/quic_routing.py). A datagram that
//! carries one of our connection IDs goes to the socket its index names
//! (cid.rs), so a connection stays with the worker that accepted it for its
//! whole life; one that starts a connection goes to a worker that takes new
//! ones. So on a reload the old workers keep their connections, finish
//! them, and new connections reach the new workers.
//!
//! Past the handshake every request stream becomes the same `Exchange` as a
//! request over TCP (request.rs: `service::answer` with the body on its
//! stream, body.rs), so the limits, the probes, the static files and every
//! interface apply unchanged. A graceful stop sends GOAWAY on every
//! connection, lets the requests it already took finish, and leaves a new
//! client's first flight unanswered for a moment (FIRST_FLIGHT_GRACE: the
//! client sends it again, and the arbiter has routed new connections
//! elsewhere by then), refusing new connections after that.

mod body;
mod cid;
mod connection;
mod request;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use body::RequestBody;

use super::shared::Shared;

/// A UDP socket the worker inherited, and its index in the SO_REUSEPORT
/// group (what our connection IDs carry).
#[derive(Debug, Clone, Copy)]
pub struct QuicSocket {
    pub fd: i32,
    pub index: u8,
}

/// How long a stopping worker waits for its last CONNECTION_CLOSE frames to
/// leave before the runtime goes.
const CLOSE_GRACE: Duration = Duration::from_millis(200);

/// For this long after its stop, a worker leaves a new client's first flight
/// unanswered instead of refusing it. The arbiter routes new connections to
/// other workers before it stops one, but a datagram already waiting in this
/// worker's socket, or sent just before the routing changed, still comes
/// here: unanswered, the client sends it again (its first probe timeout, about
/// a second, RFC 9002 6.2.2) and the new routing takes it to a worker that
/// serves it; refused, the client's request fails (seen once, in CI
/// of test_reloads_lose_no_request). Past the window nothing routes new
/// clients here unless every worker is stopping, and then a refusal is the
/// quick answer.
const FIRST_FLIGHT_GRACE: Duration = Duration::from_secs(2);

/// Starts serving HTTP/3 on `socket` in the current runtime; returns at once.
pub fn spawn(
    socket: QuicSocket,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let tls = shared
        .config
        .tls
        .as_ref()
        .ok_or_else(|| io::Error::other("HTTP/3 needs TLS (--certfile)"))?;
    let fd = super::listener::dup(socket.fd)?;
    let udp = std::net::UdpSocket::from(fd);
    udp.set_nonblocking(true)?;
    let local = udp.local_addr()?.to_string();
    let server = server_config(tls, &shared)?;
    let mut endpoint_config = quinn::EndpointConfig::default();
    let index = socket.index;
    endpoint_config.cid_generator(move || Box::new(cid::RoutedCids::new(index)));
    let endpoint = quinn::Endpoint::new(
        endpoint_config,
        Some(server),
        udp,
        Arc::new(quinn::TokioRuntime),
    )?;
    let accepting = shared.counters.accepting();
    tokio::spawn(async move {
        let _accepting = accepting;
        accept_loop(&endpoint, &shared, stop, &local).await;
        let _ = tokio::time::timeout(CLOSE_GRACE, endpoint.wait_idle()).await;
    });
    Ok(())
}

/// The QUIC side of the settings: TLS 1.3 with ALPN `h3`, and flow-control
/// windows that bound what one client can make the worker hold.
fn server_config(tls: &rustls::ServerConfig, shared: &Shared) -> io::Result<quinn::ServerConfig> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // QUIC takes no early data here: 0-RTT requests could be replayed.
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| io::Error::other(format!("HTTP/3 TLS: {e}")))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport(&shared.config)));
    Ok(server)
}

fn transport(config: &super::config::ServerConfig) -> quinn::TransportConfig {
    let h2 = &config.http2;
    let mut t = quinn::TransportConfig::default();
    // The HTTP/2 limits, read the same way: streams a client may open at
    // once, and what it may send ahead per stream and per connection.
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(h2.max_concurrent_streams.max(1)));
    // The client's control stream and QPACK's two, plus room for grease.
    t.max_concurrent_uni_streams(quinn::VarInt::from_u32(8));
    t.stream_receive_window(quinn::VarInt::from_u32(
        h2.initial_stream_window_size.max(16 * 1024),
    ));
    t.receive_window(quinn::VarInt::from_u32(
        h2.initial_connection_window_size
            .max(h2.initial_stream_window_size)
            .max(64 * 1024),
    ));
    // What one connection's responses may hold unacknowledged.
    t.send_window(h2.max_send_buffer_size.max(64 * 1024) as u64 * 4);
    // connection.rs closes a connection with no request for `--keep-alive`
    // politely (GOAWAY, then H3_NO_ERROR); QUIC's own idle timeout, which
    // drops it silently, is only for a peer that has gone: set past it.
    let idle = config
        .keepalive
        .or(config.header_timeout)
        .unwrap_or(Duration::from_secs(30));
    let quic_idle = (idle * 2).max(Duration::from_secs(5));
    t.max_idle_timeout(quinn::IdleTimeout::try_from(quic_idle).ok());
    t
}

/// Takes new connections until the stop; then leaves them unanswered for
/// FIRST_FLIGHT_GRACE and refuses them after it, until the last connection
/// of this worker has closed.
async fn accept_loop(
    endpoint: &quinn::Endpoint,
    shared: &Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    local: &str,
) {
    let open = Arc::new(tokio::sync::Notify::new());
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut stopped_at = stop.borrow().then(Instant::now);
    loop {
        let leftover = live.load(std::sync::atomic::Ordering::Acquire);
        if stopped_at.is_some() && leftover == 0 {
            return;
        }
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { return };
                match stopped_at {
                    Some(at) if at.elapsed() < FIRST_FLIGHT_GRACE => {
                        incoming.ignore();
                        continue;
                    }
                    Some(_) => {
                        incoming.refuse();
                        continue;
                    }
                    None if room_is_full(shared) => {
                        incoming.refuse();
                        continue;
                    }
                    None => {}
                }
                if must_prove_address(&incoming, shared) {
                    // A Retry costs us no state: a spoofed source never
                    // answers it, so it cannot fill the connection seats.
                    let _ = incoming.retry();
                    continue;
                }
                let held = shared.counters.connection();
                let live = LiveGuard::new(live.clone(), open.clone());
                let shared = shared.clone();
                let local = local.to_string();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let _held = held;
                    let _live = live;
                    connection::serve(incoming, local, shared, stop).await;
                });
            }
            _ = stop.changed(), if stopped_at.is_none() => stopped_at = Some(Instant::now()),
            _ = open.notified(), if stopped_at.is_some() => {}
        }
    }
}

/// One connection of this endpoint; the last to go wakes a stopping accept loop.
struct LiveGuard {
    live: Arc<std::sync::atomic::AtomicUsize>,
    gone: Arc<tokio::sync::Notify>,
}

impl LiveGuard {
    fn new(live: Arc<std::sync::atomic::AtomicUsize>, gone: Arc<tokio::sync::Notify>) -> Self {
        live.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        LiveGuard { live, gone }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.live.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.gone.notify_one();
    }
}

/// `--worker-connections` for QUIC: past it a new connection is refused at
/// once (the client tries again, maybe on another worker), rather than
/// making room as TCP does (room.rs): a QUIC connection costs its state from
/// the first packet, so none waits in a backlog.
fn room_is_full(shared: &Shared) -> bool {
    let cap = shared.config.max_connections;
    cap > 0 && shared.counters.open() >= cap
}

/// Past half of `--worker-connections` (or 256 open without the cap), a new
/// client must show it receives at its address (a Retry round trip, RFC
/// 9000 8.1.2) before it gets a connection: handshakes from spoofed
/// addresses would otherwise hold seats until they time out, and refuse
/// everyone else.
fn must_prove_address(incoming: &quinn::Incoming, shared: &Shared) -> bool {
    if incoming.remote_address_validated() || !incoming.may_retry() {
        return false;
    }
    let cap = shared.config.max_connections;
    let busy_at = if cap > 0 { cap.div_ceil(2) } else { 256 };
    shared.counters.open() >= busy_at
}
