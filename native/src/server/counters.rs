//! What the worker reads of its server at each tick, counted where it
//! happens: accept loops, connections, requests in flight and finished, and
//! the word that the worker's loop is alive.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub struct Counters {
    /// Accept loops still running: until they are all gone a connection may
    /// still arrive, so the worker cannot call the server drained.
    accepting: AtomicUsize,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    /// Finished requests not yet reported to the worker (it counts in batches).
    requests: AtomicU64,
    /// Requests begun since the start.
    begun: AtomicU64,
    /// When the worker's loop last said it was alive (coarse ns, plus one);
    /// 0 before its first word, which counts as alive.
    loop_beat: AtomicU64,
}

/// A loop silent this long is stuck: the accept loops stop taking
/// connections until it speaks again. The worker's tick speaks every 0.1 s.
const LOOP_STUCK_AFTER_NS: u64 = 1_000_000_000;
/// How often a paused accept loop looks again.
const STUCK_RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

impl Counters {
    /// The worker's loop is alive (its tick, `NativeServer::beat`).
    pub fn loop_beat(&self) {
        let now = crate::coarse_clock::monotonic_ns() + 1;
        self.loop_beat.store(now, Ordering::Relaxed);
    }

    pub(super) fn loop_stuck(&self) -> bool {
        let beat = self.loop_beat.load(Ordering::Relaxed);
        beat != 0 && crate::coarse_clock::monotonic_ns() + 1 - beat > LOOP_STUCK_AFTER_NS
    }

    /// Waits while the worker's loop is stuck. A connection accepted then
    /// would wait for the loop, and die with the worker if `--timeout`
    /// kills it; left in the backlog, another worker (or this one's
    /// replacement) takes it.
    pub async fn loop_alive(&self) {
        while self.loop_stuck() {
            tokio::time::sleep(STUCK_RECHECK).await;
        }
    }

    /// Resolves once the loop has gone silent long enough to be stuck: an
    /// accept loop already waiting for a connection gives up its wait then.
    /// While the loop speaks, this wakes about once per LOOP_STUCK_AFTER.
    pub async fn loop_goes_stuck(&self) {
        loop {
            let beat = self.loop_beat.load(Ordering::Relaxed);
            let now = crate::coarse_clock::monotonic_ns() + 1;
            let left = if beat == 0 {
                LOOP_STUCK_AFTER_NS
            } else {
                (beat + LOOP_STUCK_AFTER_NS).saturating_sub(now)
            };
            if left == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_nanos(left)).await;
        }
    }

    /// Counted from before the accept loop is spawned until it ends (or is dropped).
    pub fn accepting(self: &Arc<Self>) -> Held {
        Held::new(self.clone(), |c| &c.accepting)
    }
    /// Counted from the moment `accept()` returned, not from the connection
    /// task's first poll: in between, a stopping worker would see no
    /// connection and shut the runtime down under it.
    pub fn connection(self: &Arc<Self>) -> Held {
        Held::new(self.clone(), |c| &c.connections)
    }
    /// Connections open now, from their accept.
    pub fn open(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
    /// The request's number in this worker, from 1.
    pub fn begin_request(&self) -> u64 {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.begun.fetch_add(1, Ordering::Relaxed) + 1
    }
    /// After `stop()`: every accept loop has ended and no connection or
    /// exchange is left. Read in this order (a connection is counted before
    /// its accept loop can end, an exchange before its connection) so that
    /// nothing slips between the reads.
    pub fn drained(&self) -> bool {
        self.accepting.load(Ordering::Acquire) == 0
            && self.connections.load(Ordering::Acquire) == 0
            && self.in_flight.load(Ordering::Acquire) == 0
    }
    /// Finished requests since the last call.
    pub fn take_requests(&self) -> u64 {
        self.requests.swap(0, Ordering::Relaxed)
    }
    pub fn end_request(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// One unit of a counter, given back when dropped: a task dropped unpolled
/// at runtime shutdown gives it back too.
pub struct Held {
    counters: Arc<Counters>,
    field: fn(&Counters) -> &AtomicUsize,
}

impl Held {
    fn new(counters: Arc<Counters>, field: fn(&Counters) -> &AtomicUsize) -> Held {
        field(&counters).fetch_add(1, Ordering::AcqRel);
        Held { counters, field }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        (self.field)(&self.counters).fetch_sub(1, Ordering::AcqRel);
    }
}
