//! One accepted WebSocket session on the upgraded connection, as one task:
//! frames in and out (tungstenite's codec), the app's close, the worker's
//! graceful stop, keep-alive pings and the close deadline.
//!
//! Received messages go to a `WsInbox` the answerer reads (no channel per
//! receive: it takes what is queued, and asks to be woken only when nothing
//! is). Reading pauses while `QUEUE_HIGH` messages wait there, and resumes
//! once the app has taken them down to `QUEUE_LOW`, or while `QUEUE_BYTES`
//! wait there. Outgoing messages come through a bounded channel, taken in
//! batches of at most `BATCH_BYTES` and written with one flush; no new ones
//! are taken while a flush waits for a slow client, so the app's sends wait
//! too.
//!
//! A client that sends and does not read: each of its pings makes
//! tungstenite queue a pong, and a flush that waits buffers every one of
//! them. After `PONGS_OWED` pings received while a flush waits, reading
//! stops until the flush is done, so TCP holds the client back; past
//! `--send-timeout` without progress the write fails (write_stall.rs) and the
//! session ends.
//!
//! Close codes: the app's own (1000 when it returns, 1011 when it raises),
//! 1012 on a graceful stop, 1011 for an unanswered ping, 1009 for a message
//! over `--ws-max-size`, 1007 for invalid UTF-8, 1002 for other protocol
//! errors. The session ends when the peer answers our close frame (or sent
//! its own, which tungstenite echoes), when the connection drops, or
//! `CLOSE_TIMEOUT` after our close frame.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, Stream};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper::HeaderMap;
use hyper_util::rt::TokioIo;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, Sleep};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use super::body::ExchangeGuard;
use super::shared::Shared;
use super::write_stall::StallIo;

/// RFC 6455 7.1.5: the connection broke without a close frame.
const ABNORMAL: u16 = 1006;
/// RFC 6455 7.1.5: a close frame without a code.
const NO_STATUS: u16 = 1005;

/// How long the peer has to answer our close frame before the connection is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Received messages waiting for the app: reading pauses at HIGH, resumes at LOW.
const QUEUE_HIGH: usize = 16;
const QUEUE_LOW: usize = 4;
/// Outgoing messages written per flush at most, and their bytes (at least
/// one message whatever its size).
const BATCH: usize = 64;
const BATCH_BYTES: usize = 64 * 1024;
/// Received message bytes waiting for the app past which reading pauses
/// (at least one message whatever its size).
const QUEUE_BYTES: usize = 1024 * 1024;
/// Pings answered while a flush waits, before reading stops: a pong is due
/// for each (RFC 6455 5.5.3 asks for the last one only), and each is buffered.
const PONGS_OWED: u8 = 8;
const PING_PAYLOAD: &[u8] = b"supervise";
/// tungstenite's read buffer, allocated up front per session and zero-filled
/// up to its size before every read: its default (128 KiB) would cost 1.3 GB
/// for 10,000 idle sessions. Larger frames still get one buffer of their size.
const READ_BUFFER: usize = 16 * 1024;

/// A received message, as the answerer takes it.
pub enum WsIn {
    Binary(Bytes),
    Text(Utf8Bytes),
    /// The session is over (closed by either side, or the connection broke);
    /// always the last one. The close code and reason: the peer's, ours, or
    /// 1006 when the connection broke without a close frame.
    Closed(u16, String),
}

impl WsIn {
    fn len(&self) -> usize {
        match self {
            WsIn::Binary(b) => b.len(),
            WsIn::Text(t) => t.len(),
            WsIn::Closed(..) => 0,
        }
    }
}

struct InboxState {
    queue: VecDeque<WsIn>,
    /// Payload bytes in `queue`.
    bytes: usize,
    ended: bool,
    /// The answerer found the queue empty and waits for `wake`.
    want: bool,
    /// The session, paused on a full queue.
    reader: Option<Waker>,
}

/// Received messages between the session (tokio) and the answerer (the loop
/// thread). `wake` runs on the tokio thread: it must not need the GIL.
pub struct WsInbox {
    state: Mutex<InboxState>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl WsInbox {
    pub fn new(wake: Box<dyn Fn() + Send + Sync>) -> Self {
        WsInbox {
            state: Mutex::new(InboxState {
                queue: VecDeque::new(),
                bytes: 0,
                ended: false,
                want: false,
                reader: None,
            }),
            wake,
        }
    }

    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next message; None after arranging for `wake` to be called when
    /// one arrives.
    pub fn take(&self) -> Option<WsIn> {
        let mut st = self.lock();
        match st.queue.pop_front() {
            Some(m) => {
                st.bytes -= m.len();
                let resume = if st.queue.len() <= QUEUE_LOW && st.bytes < QUEUE_BYTES {
                    st.reader.take()
                } else {
                    None
                };
                drop(st);
                if let Some(w) = resume {
                    w.wake();
                }
                Some(m)
            }
            None => {
                st.want = true;
                None
            }
        }
    }

    /// A message taken for a receiver that stopped waiting: first again.
    pub fn put_back(&self, m: WsIn) {
        let mut st = self.lock();
        st.bytes += m.len();
        st.queue.push_front(m);
    }

    /// No more messages will come (`Closed` may still be queued).
    pub fn is_ended(&self) -> bool {
        self.lock().ended
    }

    fn push(&self, m: WsIn) {
        let wake = {
            let mut st = self.lock();
            if st.ended {
                return;
            }
            st.bytes += m.len();
            st.queue.push_back(m);
            std::mem::take(&mut st.want)
        };
        if wake {
            (self.wake)();
        }
    }

    /// No more messages: `Closed(code, reason)` is queued last (only the
    /// first end counts).
    pub fn end(&self, code: u16, reason: &str) {
        let wake = {
            let mut st = self.lock();
            if st.ended {
                return;
            }
            st.ended = true;
            st.queue.push_back(WsIn::Closed(code, reason.to_owned()));
            std::mem::take(&mut st.want)
        };
        if wake {
            (self.wake)();
        }
    }

    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.lock();
        if st.queue.len() < QUEUE_HIGH && st.bytes < QUEUE_BYTES {
            Poll::Ready(())
        } else {
            st.reader = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// Waits for the 101 (or HTTP/2's 200) to be written, then runs the session
/// to its end.
///
/// `own_connection`: the session has the connection to itself (HTTP/1.1),
/// whose hyper side ended at the hand-over; over HTTP/2 it is one stream and
/// the connection still counts itself.
pub async fn run(
    upgrade: OnUpgrade,
    accept: WsAccept,
    shared: Arc<Shared>,
    guard: ExchangeGuard,
    own_connection: bool,
) {
    let WsAccept {
        inbox,
        outgoing,
        close,
        opened,
        ..
    } = accept;
    let io = match upgrade.await {
        Ok(io) => io,
        Err(_) => {
            inbox.end(ABNORMAL, "");
            opened(false);
            return;
        }
    };
    // The session counts as an open connection while it lives.
    let _open = own_connection.then(|| shared.counters.connection());
    let Some(cfg) = shared.config.ws.clone() else {
        return;
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(cfg.max_size))
        .max_frame_size(Some(cfg.max_size));
    // Over HTTP/1.1 the connection's own writes are watched (connection.rs);
    // an HTTP/2 stream's are not.
    let stall_limit = (!own_connection)
        .then_some(shared.config.send_timeout)
        .flatten();
    let io = StallIo::new(TokioIo::new(io), stall_limit, shared.config.send_min_rate);
    let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let mut stop = shared.stop_rx.clone();
    let now = Instant::now();
    let mut session = Session {
        ws,
        inbox: inbox.clone(),
        outgoing,
        outgoing_open: true,
        close: Some(close),
        stop: Some(Box::pin(async move {
            let _ = stop.wait_for(|s| *s).await;
        })),
        timer: Box::pin(tokio::time::sleep_until(now)),
        timer_at: None,
        open: true,
        reading: true,
        dirty: false,
        pongs_owed: 0,
        ping_interval: cfg.ping_interval,
        ping_timeout: cfg.ping_timeout,
        next_ping: cfg.ping_interval.map(|i| now + i),
        pong_due: None,
        deadline: None,
    };
    opened(true);
    session.drive().await;
    inbox.end(ABNORMAL, "");
    drop(session);
    drop(guard);
}

enum Event {
    In(Option<Result<Message, WsError>>),
    Out(Message),
    /// The app's close code and reason; None when it dropped the session.
    AppClose(Option<(u16, String)>),
    Stop,
    Timer,
    /// The connection failed under a write, or a failed session's close
    /// frame is out: nothing left to do.
    Over,
}

struct Session {
    ws: WebSocketStream<StallIo<TokioIo<Upgraded>>>,
    inbox: Arc<WsInbox>,
    outgoing: mpsc::Receiver<Message>,
    outgoing_open: bool,
    close: Option<oneshot::Receiver<(u16, String)>>,
    stop: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    timer: Pin<Box<Sleep>>,
    timer_at: Option<Instant>,
    /// Messages flow both ways; false once a close frame went either way.
    open: bool,
    /// False once the frame stream failed (it cannot be read again).
    reading: bool,
    /// Frames written but not flushed (ours, or tungstenite's pong/close echo).
    dirty: bool,
    /// Pings received since the last completed flush.
    pongs_owed: u8,
    ping_interval: Option<Duration>,
    ping_timeout: Option<Duration>,
    next_ping: Option<Instant>,
    pong_due: Option<Instant>,
    /// When a closing session is dropped, whatever the peer does.
    deadline: Option<Instant>,
}

impl Session {
    async fn drive(&mut self) {
        loop {
            let event = poll_fn(|cx| self.poll_event(cx)).await;
            if !self.handle(event) {
                return;
            }
        }
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if self.dirty {
            match Pin::new(&mut self.ws).poll_flush(cx) {
                Poll::Ready(Ok(())) => {
                    self.dirty = false;
                    self.pongs_owed = 0;
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Event::Over),
                Poll::Pending => {}
            }
        }
        if !self.reading && !self.dirty {
            // A failed session whose close frame is out.
            return Poll::Ready(Event::Over);
        }
        if let Some(close) = self.close.as_mut() {
            if let Poll::Ready(code) = Pin::new(close).poll(cx) {
                self.close = None;
                return Poll::Ready(Event::AppClose(code.ok()));
            }
        }
        if let Some(stop) = self.stop.as_mut() {
            if stop.as_mut().poll(cx).is_ready() {
                self.stop = None;
                return Poll::Ready(Event::Stop);
            }
        }
        if self.outgoing_open && !self.dirty {
            match self.outgoing.poll_recv(cx) {
                Poll::Ready(Some(m)) => return Poll::Ready(Event::Out(m)),
                Poll::Ready(None) => self.outgoing_open = false,
                Poll::Pending => {}
            }
        }
        // Once closing, what the peer still sends is dropped: no need for room.
        if self.reading
            && self.pongs_owed < PONGS_OWED
            && (!self.open || self.inbox.poll_room(cx).is_ready())
        {
            if let Poll::Ready(m) = Pin::new(&mut self.ws).poll_next(cx) {
                return Poll::Ready(Event::In(m));
            }
        }
        let at = [self.deadline, self.next_ping, self.pong_due]
            .into_iter()
            .flatten()
            .min();
        if at != self.timer_at {
            self.timer_at = at;
            if let Some(at) = at {
                self.timer.as_mut().reset(at);
            }
        }
        if self.timer_at.is_some() && self.timer.as_mut().poll(cx).is_ready() {
            self.timer_at = None;
            return Poll::Ready(Event::Timer);
        }
        Poll::Pending
    }

    /// False when the session is over.
    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::In(Some(Ok(message))) => match message {
                Message::Text(t) if self.open => self.inbox.push(WsIn::Text(t)),
                Message::Binary(b) if self.open => self.inbox.push(WsIn::Binary(b)),
                // tungstenite queued the pong; it goes out with the next flush.
                Message::Ping(_) => {
                    self.dirty = true;
                    self.pongs_owed = self.pongs_owed.saturating_add(1);
                }
                Message::Pong(_) => self.pong_due = None,
                Message::Close(frame) => {
                    // The peer's close (tungstenite queued the echo), or its
                    // answer to ours: the stream ends after the flush.
                    if self.open {
                        let (code, reason) = frame.map_or((NO_STATUS, String::new()), |f| {
                            (u16::from(f.code), f.reason.as_str().to_owned())
                        });
                        self.closing(code, &reason);
                    }
                    self.dirty = true;
                }
                _ => {}
            },
            Event::In(Some(Err(e))) => {
                self.reading = false;
                match failure_code(&e) {
                    Some(code) if self.open => return self.close(code),
                    _ => return false,
                }
            }
            Event::In(None) | Event::Over => return false,
            Event::Out(m) => {
                if !self.open {
                    return true;
                }
                let mut bytes = m.len();
                if !self.send(m) {
                    return false;
                }
                for _ in 0..BATCH {
                    if bytes >= BATCH_BYTES {
                        break;
                    }
                    match self.outgoing.try_recv() {
                        Ok(m) => {
                            bytes += m.len();
                            if !self.send(m) {
                                return false;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
            Event::AppClose(close) if self.open => {
                // What the app sent before closing goes out before the close frame.
                while let Ok(m) = self.outgoing.try_recv() {
                    if !self.send(m) {
                        return false;
                    }
                }
                let (code, reason) = close.unwrap_or((1011, String::new()));
                return self.close_with(code, &reason);
            }
            Event::Stop if self.open => return self.close_with(1012, "service restart"),
            Event::AppClose(_) | Event::Stop => {}
            Event::Timer => return self.on_timer(),
        }
        true
    }

    fn on_timer(&mut self) -> bool {
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return false;
        }
        if !self.open {
            return true;
        }
        if self.pong_due.is_some_and(|d| now >= d) {
            return self.close(1011);
        }
        if let (Some(at), Some(interval)) = (self.next_ping, self.ping_interval) {
            if now >= at {
                self.next_ping = Some(now + interval);
                if self.pong_due.is_none() {
                    self.pong_due = self.ping_timeout.map(|t| now + t);
                }
                return self.send(Message::Ping(Bytes::from_static(PING_PAYLOAD)));
            }
        }
        true
    }

    fn send(&mut self, m: Message) -> bool {
        self.dirty = true;
        Pin::new(&mut self.ws).start_send(m).is_ok()
    }

    fn closing(&mut self, code: u16, reason: &str) {
        self.open = false;
        self.next_ping = None;
        self.pong_due = None;
        self.deadline = Some(Instant::now() + CLOSE_TIMEOUT);
        self.inbox.end(code, reason);
    }

    /// Our close frame; the session then waits for the peer's answer.
    fn close(&mut self, code: u16) -> bool {
        self.close_with(code, "")
    }

    fn close_with(&mut self, code: u16, reason: &str) -> bool {
        self.closing(code, reason);
        self.send(Message::Close(Some(CloseFrame {
            code: code.into(),
            reason: Utf8Bytes::from(reason.to_owned()),
        })))
    }
}

/// The close code for a peer that broke the protocol; None when the
/// connection itself is gone (nothing can be sent).
fn failure_code(e: &WsError) -> Option<u16> {
    match e {
        WsError::Capacity(_) => Some(1009),
        WsError::Utf8(_) => Some(1007),
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
        WsError::Protocol(_) => Some(1002),
        _ => None,
    }
}

/// The channels of an accepted session, made by the answerer.
pub struct WsAccept {
    /// Where received messages go (the answerer reads them out).
    pub inbox: Arc<WsInbox>,
    /// Messages to send, in order; the sender awaits when it is full.
    pub outgoing: mpsc::Receiver<Message>,
    /// The close code and reason the app ends the session with.
    pub close: oneshot::Receiver<(u16, String)>,
    /// Fields the 101 carries besides the handshake's own
    /// (Sec-WebSocket-Protocol, an app's Set-Cookie).
    pub headers: HeaderMap,
    /// Called once: true when the 101 is written and frames flow, false when
    /// the client left before that.
    pub opened: Box<dyn FnOnce(bool) + Send>,
}
