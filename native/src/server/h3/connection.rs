//! One QUIC connection: the handshake, HTTP/3's control streams (h3), a
//! task per request stream, and the graceful stop (GOAWAY, then the
//! requests already taken finish).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use crate::server::exchange::{ConnInfo, TlsInfo};
use crate::server::shared::Shared;

/// On a stop, how long a connection that has sent no request yet is given
/// to send its first (IDLE_GRACE_ON_STOP of the other protocols).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(1000);

/// How many streams past the last one taken a GOAWAY still lets in: as many
/// as the client may have open at once, since it may have sent them all
/// before the GOAWAY reached it (RFC 9114 5.2 lets them be served).
fn h2_streams(shared: &Shared) -> usize {
    shared.config.http2.max_concurrent_streams.max(1) as usize
}

/// HTTP/3's "no error" (RFC 9114 8.1), for a connection we close when done.
const H3_NO_ERROR: u32 = 0x100;

pub(super) async fn serve(
    incoming: quinn::Incoming,
    local: String,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
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
    let Ok(mut h3_conn) = h3_conn else {
        return;
    };
    // GOAWAY names the last stream that will be served; before the first
    // request there is none to name, so a connection stopped that early
    // waits up to STOP_GRACE for it (a client that connected is about to
    // send one) rather than refusing everything.
    let grace = h2_streams(&shared);
    let mut accepted = false;
    let mut stopping = *stop.borrow();
    let mut goaway_sent = false;
    let mut grace_timer = Box::pin(tokio::time::sleep(STOP_GRACE));
    // Idle as an HTTP/2 connection is (connection.rs): no request for
    // `--keep-alive`. QUIC's own idle timeout does not see it, since the
    // client's PINGs count as activity there.
    let idle_tick = shared
        .config
        .keepalive
        .or(shared.config.header_timeout)
        .map(|idle| idle / 2);
    let mut idle_timer = Box::pin(tokio::time::sleep(idle_tick.unwrap_or(STOP_GRACE)));
    let mut quiet_ticks = 0u32;
    let mut seen = conn.activity();
    loop {
        if stopping && !goaway_sent && (accepted || grace_timer.is_elapsed()) {
            goaway_sent = true;
            let _ = h3_conn.shutdown(grace).await;
        }
        tokio::select! {
            next = h3_conn.accept() => match next {
                Ok(Some(resolver)) => {
                    accepted = true;
                    let shared = shared.clone();
                    let conn = conn.clone();
                    tokio::spawn(super::request::serve(resolver, shared, conn));
                }
                // GOAWAY sent or received and every request it let in done,
                // or the connection closed.
                Ok(None) | Err(_) => break,
            },
            _ = stop.changed(), if !stopping => {
                stopping = true;
                quiet_ticks = 0;
                grace_timer.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                idle_timer.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE / 2);
            }
            _ = grace_timer.as_mut(), if stopping && !goaway_sent => {}
            _ = idle_timer.as_mut(), if stopping || idle_tick.is_some() => {
                let now = conn.activity();
                let busy = conn.busy.load(std::sync::atomic::Ordering::Relaxed);
                quiet_ticks = if busy == 0 && now == seen { quiet_ticks + 1 } else { 0 };
                seen = now;
                // Two quiet ticks: idle for 1 to 1.5 times the tick's double.
                // h3 ends `accept()` only once the *client* has sent GOAWAY,
                // so a connection we sent ours on is closed here once quiet.
                if quiet_ticks >= 2 {
                    if stopping || !accepted {
                        break;
                    }
                    stopping = true;
                    quiet_ticks = 0;
                }
                let tick = if stopping { STOP_GRACE / 2 } else { idle_tick.unwrap_or(STOP_GRACE) };
                idle_timer.as_mut().reset(tokio::time::Instant::now() + tick);
            }
        }
    }
    // Requests still writing hold their streams; the connection closes once
    // quinn has nothing left to send for them.
    drop(h3_conn);
    wait_streams_done(&conn, &quic).await;
    quic.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
}

/// Waits until no exchange of `conn` is in flight (their tasks write the
/// responses), polling: this runs once per connection, at its end.
async fn wait_streams_done(conn: &ConnInfo, quic: &quinn::Connection) {
    while conn.busy.load(std::sync::atomic::Ordering::Acquire) > 0 && quic.close_reason().is_none()
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
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
