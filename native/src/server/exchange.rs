//! What crosses from the server to whoever answers requests, and back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::incoming::Incoming;
use bytes::Bytes;

use super::exchange_head::ExchangeHead;
use super::reply_batch::ReplySlot;

/// Per connection, shared by its requests.
#[derive(Debug)]
pub struct ConnInfo {
    /// "addr:port"; "" on a unix socket.
    pub client: String,
    pub server: String,
    pub scheme: &'static str,
    /// The connection's socket (TCP or unix, under any TLS), for watching
    /// the client's FIN (fin_watch.rs); not owned.
    pub socket: Option<std::os::fd::RawFd>,
    /// Exchanges of this connection not over yet, and bytes read so far:
    /// together they tell the keep-alive watchdog whether the connection idles.
    pub(crate) busy: std::sync::atomic::AtomicUsize,
    pub(crate) read_bytes: std::sync::atomic::AtomicU64,
    /// HTTP/2 response bodies whose last chunk hyper holds and has not asked
    /// past (streams waiting for the client to open its window), and how many
    /// chunks it has let go of so far: with chunks held and none let go for
    /// `--send-timeout`, the client is not reading (connection.rs).
    pub(crate) held_chunks: std::sync::atomic::AtomicUsize,
    pub(crate) chunks_let_go: std::sync::atomic::AtomicU64,
    /// Requests begun; what counts as activity on HTTP/2, where the client's
    /// pings and window updates must not keep an idle connection open.
    requests: std::sync::atomic::AtomicU64,
    h2: AtomicBool,
    /// An HTTP/3 connection: its requests are counted as HTTP/2's are.
    h3: AtomicBool,
    /// precheck_io.rs cut a chunked body `http1_codec` refused: hyper sees the stream end
    /// inside it, and the body reader must answer 400, not "client gone".
    body_refused: AtomicBool,
    /// Whether the request that asked to upgrade was (precheck_io.rs waits on it).
    pub(crate) upgrade: super::upgrade_gate::UpgradeGate,
    /// What the TLS handshake settled; `None` on a plain connection.
    pub tls: Option<TlsInfo>,
    /// Its place under `--worker-connections`; `None` without the cap.
    pub(crate) seat: Option<Arc<super::room::Seat>>,
    /// Why the server gave up on a client that did not read (write_stall.rs,
    /// HTTP/2's stall watch): logged once when the connection ends.
    pub(crate) gave_up: std::sync::OnceLock<&'static str>,
    /// What the app's adapter keeps for the connection's later requests
    /// (the ASGI scope's connection keys, asgi/conn_scope.rs): made at the
    /// first request, opaque here, dropped with the connection.
    pub adapter_state: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

/// A TLS connection as an app may ask about it (ASGI's `tls` extension).
#[derive(Debug, Clone)]
pub struct TlsInfo {
    /// 0x0303 for TLS 1.2, 0x0304 for 1.3.
    pub version: u16,
    /// The IANA number, 0x1301 for TLS_AES_128_GCM_SHA256.
    pub cipher_suite: u16,
    /// The client's certificate and its chain, DER, as it sent them (verified
    /// against `--ca-certs`: the handshake fails otherwise).
    pub client_chain: Vec<Vec<u8>>,
}

impl ConnInfo {
    pub fn new(client: String, server: String, scheme: &'static str) -> Self {
        ConnInfo {
            client,
            server,
            scheme,
            socket: None,
            busy: Default::default(),
            read_bytes: Default::default(),
            held_chunks: Default::default(),
            chunks_let_go: Default::default(),
            requests: Default::default(),
            h2: AtomicBool::new(false),
            h3: AtomicBool::new(false),
            body_refused: AtomicBool::new(false),
            upgrade: Default::default(),
            tls: None,
            seat: None,
            gave_up: Default::default(),
            adapter_state: Default::default(),
        }
    }

    /// Every request passes here first; its number on the connection, from 1.
    pub(crate) fn saw_request(&self) -> u64 {
        self.requests.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// In a request, or on hyper, from now on; false once its seat went to
    /// a newer connection: the connection must end without serving.
    pub(crate) fn seat_busy(&self) -> bool {
        self.seat.as_ref().is_none_or(|seat| seat.busy())
    }

    /// Known before the first request is read (ALPN, `--http`, or the preface).
    pub(crate) fn set_h2(&self) {
        self.h2.store(true, Ordering::Relaxed);
    }

    pub(crate) fn set_h3(&self) {
        self.h3.store(true, Ordering::Relaxed);
    }

    pub fn is_h3(&self) -> bool {
        self.h3.load(Ordering::Relaxed)
    }

    pub(crate) fn refuse_body(&self) {
        self.body_refused.store(true, Ordering::Release);
    }

    pub fn body_refused(&self) -> bool {
        self.body_refused.load(Ordering::Acquire)
    }

    pub(crate) fn is_h2(&self) -> bool {
        self.h2.load(Ordering::Relaxed)
    }

    /// Changes while the client is doing something.
    pub(crate) fn activity(&self) -> u64 {
        if self.is_h2() || self.is_h3() {
            self.requests.load(Ordering::Relaxed)
        } else {
            self.read_bytes.load(Ordering::Relaxed)
        }
    }
}

/// One request handed over: the head, the body (still on the wire, or read),
/// and where the answer goes (`ReplySlot`, which also knows the runtime that
/// owns the connection: body reads run there).
pub struct Exchange {
    pub head: ExchangeHead,
    pub body: ExchangeBody,
    pub conn: Arc<ConnInfo>,
    pub reply: ReplySlot,
    pub tracker: Arc<Tracker>,
    pub limit_body: u64,
}

/// Bodies up to this size with a Content-Length are read before the request
/// is handed over (direct_http1.rs, and the bridge for hyper's requests): the
/// app's first read is then answered at once.
pub const SMALL_BODY: u64 = 64 * 1024;

/// A request's body: still coming through hyper, or read before the
/// hand-over (direct_http1.rs serves only requests whose body is in hand).
pub enum ExchangeBody {
    Incoming(Incoming),
    Whole(Bytes),
    /// The client left (or the connection broke) before all of it came.
    Cut,
}

type OnGone = Box<dyn FnOnce() + Send>;

/// The life of one exchange as its answerer sees it: `gone` once the server
/// dropped it (response written, or the connection closed under it);
/// `aborted` when the answerer wants a streamed response cut off.
#[derive(Default)]
pub struct Tracker {
    gone: AtomicBool,
    aborted: AtomicBool,
    on_gone: Mutex<Vec<OnGone>>,
    /// Where interim (1xx) responses go, on connections whose loop writes
    /// them (HTTP/1.1 without hyper: hyper has no way to send one).
    pub interim: Option<Interim>,
}

/// 1xx responses, whole (head bytes), queued by the answerer for the
/// connection to write before the final response.
#[derive(Default)]
pub struct Interim {
    queued: Mutex<Vec<Bytes>>,
    /// Set by `push`, cleared by `ready`.
    pending: AtomicBool,
    /// The connection's task while it waits for the reply. Not a `Notify`:
    /// that takes its lock to register and again to drop, for every ASGI
    /// request on HTTP/1.1, hints or not.
    waiter: futures_util::task::AtomicWaker,
}

impl Interim {
    pub fn push(&self, head: Bytes) {
        self.queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(head);
        self.pending.store(true, Ordering::Release);
        self.waiter.wake();
    }

    /// Waits for a response to be queued (or one queued since the last wait).
    pub async fn ready(&self) {
        std::future::poll_fn(|cx| {
            if self.pending.swap(false, Ordering::AcqRel) {
                return std::task::Poll::Ready(());
            }
            self.waiter.register(cx.waker());
            // Pushed between the first look and the registration.
            if self.pending.swap(false, Ordering::AcqRel) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await
    }

    pub fn take(&self) -> Vec<Bytes> {
        std::mem::take(&mut *self.queued.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether something was pushed since the last wait: each wait is
    /// followed by a `take`, and a push sets the flag after its item is in.
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }
}

impl Tracker {
    /// For an exchange whose connection can write interim responses.
    pub fn with_interim() -> Self {
        Tracker {
            interim: Some(Interim::default()),
            ..Tracker::default()
        }
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Runs `f` once the exchange is over (at once when it already is).
    pub fn on_gone(&self, f: OnGone) {
        let mut waiters = self.on_gone.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_gone() {
            drop(waiters);
            f();
        } else {
            waiters.push(f);
        }
    }

    pub fn finish(&self) {
        let waiters = {
            let mut guard = self.on_gone.lock().unwrap_or_else(|e| e.into_inner());
            self.gone.store(true, Ordering::Release);
            std::mem::take(&mut *guard)
        };
        for f in waiters {
            f();
        }
    }

    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }
}
