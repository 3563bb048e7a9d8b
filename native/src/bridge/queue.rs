//! The one way from tokio to Python: a queue of events plus a wake-up socket
//! the asyncio loop watches (`loop.add_reader`). A wake-up is written only
//! when the queue turns non-empty, so under load one loop wake-up carries
//! many requests and completions.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

use bytes::Bytes;
use pyo3::prelude::*;

use crate::server::{Dispatch, Exchange, ExchangeBody, WsExchange, SMALL_BODY};

/// The result of work done in tokio for an awaiting Python future.
pub enum Outcome {
    Bytes(Bytes),
    None,
    /// `StopAsyncIteration`: the body stream ended.
    End,
    /// A value the adapter makes on the loop's thread from a body chunk and
    /// a flag (ASGI's `http.request` and `http.disconnect` messages).
    Made(MakeValue, Bytes, bool),
    /// An exception of the adapter's choosing, with its message.
    Raise(MakeError, &'static str),
}

/// Makes an `Outcome::Made` value (with the GIL, on the loop's thread).
pub type MakeValue = for<'py> fn(Python<'py>, &[u8], bool) -> PyResult<Bound<'py, PyAny>>;

/// Makes an `Outcome::Raise` exception.
pub type MakeError = fn(Python<'_>, &'static str) -> PyErr;

pub enum Event {
    Request(Box<Exchange>),
    WebSocket(Box<WsExchange>),
    Ready(Py<PyAny>, Outcome),
    /// Work that needs the GIL, run on the loop thread by `drain()`.
    Call(Box<dyn FnOnce(Python<'_>) + Send>),
}

pub struct Bridge {
    queue: Mutex<Vec<Event>>,
    wake_tx: UnixStream,
    wake_rx: UnixStream,
}

impl Bridge {
    pub fn new() -> std::io::Result<Self> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        Ok(Bridge {
            queue: Mutex::new(Vec::with_capacity(64)),
            wake_tx,
            wake_rx,
        })
    }

    pub fn fileno(&self) -> i32 {
        self.wake_rx.as_raw_fd()
    }

    pub fn push(&self, event: Event) {
        let wake = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            let wake = queue.is_empty();
            queue.push(event);
            wake
        };
        if wake {
            // A full socket buffer means a wake-up is pending already.
            let _ = (&self.wake_tx).write(&[1]);
        }
    }

    /// Drops `value`, which holds Python objects, on the loop's thread:
    /// dropped on a runtime thread, they would go to pyo3's pool of deferred
    /// references, and once that pool exists every call into this crate
    /// locks it to look (about 38 instructions, seven times a request).
    pub fn drop_on_loop(&self, value: impl Send + 'static) {
        self.push(Event::Call(Box::new(move |_py| drop(value))));
    }

    /// Everything queued so far. The wake-up is consumed before the queue is
    /// taken: an event pushed in between is taken now and leaves at most
    /// one spurious wake-up, never a missed one.
    pub fn take(&self) -> Vec<Event> {
        let mut sink = [0u8; 256];
        loop {
            match (&self.wake_rx).read(&mut sink) {
                Ok(n) if n == sink.len() => continue,
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The server's dispatcher: every request becomes an event for the loop.
pub struct BridgeDispatch {
    pub bridge: std::sync::Arc<Bridge>,
    /// The app may send early hints (ASGI).
    pub interim: bool,
}

impl Dispatch for BridgeDispatch {
    /// A small body with a Content-Length is read on the runtime first, so the
    /// app's first read of it is answered at once instead of with one more
    /// crossing each way. Not when the client waits for 100 Continue: that is
    /// asked for when the app reads, as the asgi worker does.
    fn dispatch(&self, mut exchange: Exchange) {
        use hyper::body::Body;
        let small = match &exchange.body {
            ExchangeBody::Incoming(incoming) => incoming
                .size_hint()
                .exact()
                .is_some_and(|n| n > 0 && n <= SMALL_BODY),
            ExchangeBody::Whole(_) | ExchangeBody::Cut => false,
        };
        let expects = exchange.head.fields().get(&hyper::header::EXPECT).is_some();
        if !small || expects {
            self.bridge.push(Event::Request(Box::new(exchange)));
            return;
        }
        let bridge = self.bridge.clone();
        exchange.reply.runtime().clone().spawn(async move {
            if let ExchangeBody::Incoming(incoming) = &mut exchange.body {
                exchange.body = read_whole(incoming).await;
            }
            bridge.push(Event::Request(Box::new(exchange)));
        });
    }

    fn writes_interim(&self) -> bool {
        self.interim
    }

    fn dispatch_ws(&self, exchange: WsExchange) {
        self.bridge.push(Event::WebSocket(Box::new(exchange)));
    }
}

/// Every data frame of `body`; a body that came in one frame (the usual
/// small one) is that frame, not a copy.
async fn read_whole(body: &mut crate::server::Incoming) -> ExchangeBody {
    use http_body_util::BodyExt;
    let mut first = Bytes::new();
    let mut joined: Option<bytes::BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return ExchangeBody::Cut;
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if let Some(whole) = joined.as_mut() {
            whole.extend_from_slice(&data);
        } else if first.is_empty() {
            first = data;
        } else {
            let mut whole = bytes::BytesMut::from(&first[..]);
            whole.extend_from_slice(&data);
            joined = Some(whole);
        }
    }
    ExchangeBody::Whole(joined.map_or(first, |w| w.freeze()))
}
