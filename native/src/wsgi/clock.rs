//! How long the app has held each thread that calls it: the worker's tick
//! dates the heartbeat back to when a thread was last free, so an app stuck
//! past `--timeout` gets its worker killed, as with the sync worker, even
//! though the tick itself runs on another thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::coarse_clock;

pub struct AppClock {
    /// Per calling thread: when its current app call began (ns on the
    /// coarse monotonic clock, plus one), 0 while it is not in the app.
    slots: Box<[AtomicU64]>,
    next: AtomicUsize,
}

thread_local! {
    static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
}

impl AppClock {
    pub fn new(threads: usize) -> Self {
        AppClock {
            slots: (0..threads.max(1)).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Read per app call; a tick of error is nothing beside `--timeout`.
    fn now(&self) -> u64 {
        coarse_clock::monotonic_ns() + 1
    }

    fn slot(&self) -> &AtomicU64 {
        let i = SLOT.with(|s| match s.get() {
            Some(i) => i,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                s.set(Some(i));
                i
            }
        });
        &self.slots[i % self.slots.len()]
    }

    /// Marks this thread as in the app until the guard is dropped.
    pub fn enter(&self) -> InApp<'_> {
        let slot = self.slot();
        slot.store(self.now(), Ordering::Relaxed);
        InApp(slot)
    }

    /// Seconds since a calling thread was last free (the newest of the
    /// running calls began then); 0 while any of them is free.
    pub fn stuck_for(&self) -> f64 {
        let now = self.now();
        let mut newest = 0u64;
        for slot in self.slots.iter() {
            let since = slot.load(Ordering::Relaxed);
            if since == 0 {
                return 0.0;
            }
            newest = newest.max(since);
        }
        now.saturating_sub(newest) as f64 / 1e9
    }
}

pub struct InApp<'a>(&'a AtomicU64);

impl Drop for InApp<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}
