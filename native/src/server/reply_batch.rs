//! Replies given on the asyncio loop's thread reach the runtime in batches.
//!
//! A oneshot send from outside a runtime wakes it: an eventfd write, and
//! often a switch to the runtime thread and back, for every reply (strace of
//! `-k native` with an ASGI app: one `write` per request from the loop
//! thread). On a thread that batches (the loop's, set up by the server's
//! Python handle), a reply waits in a thread-local list until `flush()`,
//! which the loop runs once per batch (the `schedule` hook asks for it when
//! the list turns non-empty); the batch then goes to each runtime as one
//! spawned task, whose sends wake their connections without a syscall.
//! Anywhere else (runtime threads, the WSGI engine) a reply is sent at once.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::reply::Reply;
use std::sync::Mutex;

type Pending = (oneshot::Sender<Reply>, Reply);

struct Batch {
    /// Replies per runtime, in the order they were given.
    groups: Vec<(Arc<Handle>, Vec<Pending>)>,
    /// Asks the loop for a `flush()` soon.
    schedule: Rc<dyn Fn()>,
    /// A reply was sent at once since the last `flush()` or `new_round()`.
    sent_one: bool,
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
    /// On a runtime thread: its runtime, one `Arc` per thread.
    static RUNTIME: RefCell<Option<Arc<Handle>>> = const { RefCell::new(None) };
}

/// The calling runtime thread's runtime.
pub(crate) fn current_runtime() -> Arc<Handle> {
    RUNTIME.with(|r| {
        r.borrow_mut()
            .get_or_insert_with(|| Arc::new(Handle::current()))
            .clone()
    })
}

/// From now on, replies given on this thread wait for `flush()`.
pub fn batch_on_this_thread(schedule: Rc<dyn Fn()>) {
    BATCH.with(|b| {
        *b.borrow_mut() = Some(Batch {
            groups: Vec::new(),
            schedule,
            sent_one: false,
        })
    });
}

/// Sends what waits, and batches no more on this thread.
pub fn stop_batching() {
    flush();
    BATCH.with(|b| b.borrow_mut().take());
}

/// Whether a reply given now on this thread should wait for `flush()`:
/// not the first one of a round (a lone request is answered without the
/// loop's extra turn), every one after it until the flush.
pub(crate) fn should_defer() -> bool {
    BATCH.with(|b| match b.borrow_mut().as_mut() {
        Some(batch) if batch.sent_one => true,
        Some(batch) => {
            batch.sent_one = true;
            false
        }
        None => false,
    })
}

/// A new round of requests reached the loop: its first reply goes at once.
pub fn new_round() {
    BATCH.with(|b| {
        if let Some(batch) = b.borrow_mut().as_mut() {
            batch.sent_one = false;
        }
    });
}

/// Holds a reply for the next `flush()` (on a thread where `should_defer()`).
pub(crate) fn defer(runtime: &Arc<Handle>, tx: oneshot::Sender<Reply>, reply: Reply) {
    let schedule = BATCH.with(|b| {
        let mut guard = b.borrow_mut();
        let batch = guard.as_mut()?;
        let first = batch.groups.is_empty();
        match batch
            .groups
            .iter_mut()
            .find(|(rt, _)| Arc::ptr_eq(rt, runtime))
        {
            Some((_, list)) => list.push((tx, reply)),
            None => batch.groups.push((runtime.clone(), vec![(tx, reply)])),
        }
        first.then(|| batch.schedule.clone())
    });
    // Outside the borrow: the hook runs Python, which may give replies too.
    if let Some(schedule) = schedule {
        schedule();
    }
}

/// Sends every reply that waits on this thread: one task per runtime.
pub fn flush() {
    let groups = BATCH.with(|b| {
        b.borrow_mut()
            .as_mut()
            .map(|batch| {
                batch.sent_one = false;
                std::mem::take(&mut batch.groups)
            })
            .unwrap_or_default()
    });
    for (runtime, replies) in groups {
        runtime.spawn(async move {
            for (tx, reply) in replies {
                let _ = tx.send(reply);
            }
        });
    }
}

/// Where the reply goes; only the first `send` counts, whoever sends it (the
/// app, or the body reader answering 413).
#[derive(Clone)]
pub struct ReplySlot {
    tx: Arc<Mutex<Option<oneshot::Sender<Reply>>>>,
    /// The runtime of the connection (a batched reply is sent there).
    runtime: Arc<tokio::runtime::Handle>,
}

impl ReplySlot {
    /// On the connection's runtime thread.
    pub fn new(tx: oneshot::Sender<Reply>) -> Self {
        ReplySlot {
            tx: Arc::new(Mutex::new(Some(tx))),
            runtime: current_runtime(),
        }
    }

    /// False when a reply was already sent (or the request is gone). On the
    /// loop's thread the reply waits for the batch (reply_batch.rs).
    pub fn send(&self, reply: Reply) -> bool {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        match tx {
            Some(tx) if tx.is_closed() => false,
            Some(tx) if should_defer() => {
                defer(&self.runtime, tx, reply);
                true
            }
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    /// The runtime that owns the request's connection (its body reads and
    /// backpressured writes run there).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    pub fn sent(&self) -> bool {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }
}
