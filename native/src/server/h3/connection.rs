//! One QUIC connection: the handshake, HTTP/3's control streams (h3), a
//! task per request stream, and the graceful stop (GOAWAY, then the
//! requests already taken finish).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::server::exchange::{ConnInfo, TlsInfo};
use crate::server::shared::Shared;

/// On a stop, how long a connection that has sent no request yet is given
/// to send its first, and how long one must then be quiet to be closed
/// (IDLE_GRACE_ON_STOP of the other protocols).
const STOP_GRACE: Duration = Duration::from_millis(1000);

/// HTTP/3's "no error" (RFC 9114 8.1), for a connection we close when done.
const H3_NO_ERROR: u32 = 0x100;

type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;

pub(super) async fn serve(
    incoming: quinn::Incoming,
    local: String,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let Ok(connecting) = incoming.accept() else {
        return;
    };
    // The handshake is bounded by QUIC's idle timeout (mod.rs: transport).
    let Ok(quic) = connecting.await else {
        return;
    };
    let mut info = ConnInfo::new(quic.remote_address().to_string(), local, "https");
    info.tls = Some(tls_info(&quic));
    info.set_h3();
    let conn = Arc::new(info);
    let h3_conn = h3::server::builder()
        .max_field_section_size(field_section_limit(&shared))
        .build::<_, Bytes>(h3_quinn::Connection::new(quic.clone()))
        .await;
    if let Ok(h3_conn) = h3_conn {
        let (held, mut all_let_go) = mpsc::channel::<()>(1);
        drive(h3_conn, &conn, &shared, stop, StreamHold { _sender: held }).await;
        // Requests still writing hold the connection (each task a
        // StreamHold): it closes once the last has let go, or the client
        // closed it.
        tokio::select! {
            _ = all_let_go.recv() => {}
            _ = quic.closed() => {}
        }
    }
    quic.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
}

/// Held by each request task of a connection until the task ends, response
/// written: the connection is not closed under it.
#[derive(Clone)]
pub(super) struct StreamHold {
    /// Never sent on: the receiver sees the channel close when the last
    /// holder is dropped.
    _sender: mpsc::Sender<()>,
}

/// Takes request streams until the connection is over: the client closed
/// it or sent GOAWAY, or it was quiet after our GOAWAY (a stop, or idle
/// past `--keep-alive`). h3 ends `accept()` only once the *client* has sent
/// GOAWAY, so every close of ours is `Closing`'s call.
async fn drive(
    mut h3_conn: H3Conn,
    conn: &Arc<ConnInfo>,
    shared: &Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    hold: StreamHold,
) {
    let mut state = Closing::new(*stop.borrow(), shared, conn);
    loop {
        if state.goaway_due() {
            let _ = h3_conn.shutdown(state.goaway_grace).await;
        }
        tokio::select! {
            next = h3_conn.accept() => match next {
                Ok(Some(resolver)) => {
                    state.accepted = true;
                    let (shared, conn) = (shared.clone(), conn.clone());
                    tokio::spawn(super::request::serve(resolver, shared, conn, hold.clone()));
                }
                Ok(None) | Err(_) => return,
            },
            _ = stop.changed(), if !state.stopping => state.stop(),
            _ = state.grace_timer.as_mut(), if state.stopping && !state.goaway_sent => {}
            _ = state.quiet_timer.as_mut(), if state.stopping || state.idle_tick.is_some() => {
                if state.quiet_tick(conn) {
                    return;
                }
            }
        }
    }
}

/// When a connection sends GOAWAY and when it closes.
struct Closing {
    stopping: bool,
    accepted: bool,
    goaway_sent: bool,
    /// How many streams past the last one taken a GOAWAY still lets in: as
    /// many as the client may have open at once, since it may have sent
    /// them all before the GOAWAY reached it (RFC 9114 5.2 lets them be
    /// served).
    goaway_grace: usize,
    /// GOAWAY names the last stream that will be served; before the first
    /// request there is none to name, so a connection stopped that early
    /// waits up to STOP_GRACE for it rather than refusing everything.
    grace_timer: Pin<Box<tokio::time::Sleep>>,
    /// Half of `--keep-alive`: idle as an HTTP/2 connection is, by requests.
    /// QUIC's own idle timeout does not see it: the client's PINGs count there.
    idle_tick: Option<Duration>,
    quiet_timer: Pin<Box<tokio::time::Sleep>>,
    quiet_ticks: u32,
    seen: u64,
}

impl Closing {
    fn new(stopping: bool, shared: &Shared, conn: &ConnInfo) -> Self {
        let config = &shared.config;
        let idle_tick = config
            .keepalive
            .or(config.header_timeout)
            .map(|idle| idle / 2);
        Closing {
            stopping,
            accepted: false,
            goaway_sent: false,
            goaway_grace: config.http2.max_concurrent_streams.max(1) as usize,
            grace_timer: Box::pin(tokio::time::sleep(STOP_GRACE)),
            idle_tick,
            quiet_timer: Box::pin(tokio::time::sleep(idle_tick.unwrap_or(STOP_GRACE))),
            quiet_ticks: 0,
            seen: conn.activity(),
        }
    }

    /// Whether GOAWAY goes out now (once).
    fn goaway_due(&mut self) -> bool {
        let due =
            self.stopping && !self.goaway_sent && (self.accepted || self.grace_timer.is_elapsed());
        self.goaway_sent |= due;
        due
    }

    fn stop(&mut self) {
        self.stopping = true;
        self.quiet_ticks = 0;
        let now = tokio::time::Instant::now();
        self.grace_timer.as_mut().reset(now + STOP_GRACE);
        self.quiet_timer.as_mut().reset(now + STOP_GRACE / 2);
    }

    /// One tick of the quiet watch; true when the connection should close.
    /// Two quiet ticks (no request begun, none in flight): quiet for 1 to
    /// 1.5 times the tick's double. Idle, it stops (GOAWAY); stopping, or
    /// idle before any request, it closes.
    fn quiet_tick(&mut self, conn: &ConnInfo) -> bool {
        let now = conn.activity();
        let busy = conn.busy.load(std::sync::atomic::Ordering::Relaxed);
        self.quiet_ticks = if busy == 0 && now == self.seen {
            self.quiet_ticks + 1
        } else {
            0
        };
        self.seen = now;
        if self.quiet_ticks >= 2 {
            if self.stopping || !self.accepted {
                return true;
            }
            self.stopping = true;
            self.quiet_ticks = 0;
        }
        let tick = match (self.stopping, self.idle_tick) {
            (false, Some(tick)) => tick,
            _ => STOP_GRACE / 2,
        };
        self.quiet_timer
            .as_mut()
            .reset(tokio::time::Instant::now() + tick);
        false
    }
}

/// QPACK's field section limit: what the HTTP/1.1 limits allow a head,
/// fields and request line together.
fn field_section_limit(shared: &Shared) -> u64 {
    let c = &shared.config;
    if c.limit_request_fields == 0 || c.limit_request_field_size == 0 {
        return u64::from(c.http2.max_header_list_size.max(16 * 1024));
    }
    let fields = c.limit_request_fields as u64 * (c.limit_request_field_size as u64 + 32);
    fields + c.limit_request_line as u64 + 64
}

fn tls_info(quic: &quinn::Connection) -> TlsInfo {
    let client_chain = quic
        .peer_identity()
        .and_then(|id| {
            id.downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .map(|chain| chain.iter().map(|c| c.to_vec()).collect())
        .unwrap_or_default();
    TlsInfo {
        // QUIC is TLS 1.3 only (RFC 9001 4.2).
        version: 0x0304,
        // quinn does not say which suite was negotiated.
        cipher_suite: 0,
        client_chain,
    }
}
