//! Leader/follower turns for the gthread worker's threads.
//!
//! One thread at a time, the leader, waits for readiness and serves what it gets
//! itself, so the fast path hands no request from one thread to another. A hand-off
//! costs little on one core, but on several the GIL then crosses cores with every
//! request: four threads served 2.6x less than one on two cores.
//!
//! The other threads wait here without the GIL. One of them, the watcher, times
//! the leader's current event. Once that event is older than `switch_after`, the
//! watcher reaches for the GIL. It gets it when the leader blocks (an app waiting
//! on I/O releases the GIL) or when the interpreter's switch interval makes the
//! leader yield. If the leader is still on that same event, the watcher takes the
//! lead and polls while the old leader finishes its request; otherwise it goes
//! back to timing. A fast request is never handed over, and a slow one holds the
//! others up for about `switch_after`.
//!
//! The watcher alone would let slow requests start only one per `switch_after`,
//! however many threads were free. So a thread coming back from a slow request
//! (one it lost the lead in, that ran `switch_after` or longer) takes the lead at
//! once from a leader that is serving: it is awake and holds the GIL already, and
//! requests are evidently slow. A thread that lost the lead that way during a
//! fast request just waits when it comes back, so fast requests never bounce the
//! lead between two threads.

use std::cell::Cell;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

thread_local! {
    /// When this thread's last event began (its request, as leader).
    static SERVED_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// What `wait_turn` ended in.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// The caller leads: it polls and serves.
    Lead,
    /// The leader's event `.0` is older than `switch_after`: get the GIL, then
    /// `depose(.0)`.
    Reach(u64),
    /// The worker is stopping: the caller's thread ends.
    Stopped,
}

pub struct Relay {
    state: Mutex<State>,
    /// The watcher waits here: timed while the leader serves, untimed while it polls.
    watcher: Condvar,
    /// Every other waiting thread.
    queue: Condvar,
    switch_after: Duration,
}

/// The event the leader is serving, and since when.
struct Serving {
    id: u64,
    since: Instant,
}

struct State {
    leader: Option<ThreadId>,
    /// None while the leader polls.
    event: Option<Serving>,
    /// The leader is blocked waiting for readiness: nothing to time until it serves.
    leader_idle: bool,
    events: u64,
    watcher: Option<ThreadId>,
    /// The watcher waits without a deadline: the leader's next event must wake it.
    watcher_idle: bool,
    stopped: bool,
}

impl State {
    fn take_lead(&mut self, me: ThreadId) {
        self.leader = Some(me);
        self.event = None;
        self.leader_idle = false;
    }
}

impl Relay {
    pub fn new(switch_after: Duration) -> Relay {
        Relay {
            state: Mutex::new(State {
                leader: None,
                event: None,
                leader_idle: false,
                events: 0,
                watcher: None,
                watcher_idle: false,
                stopped: false,
            }),
            watcher: Condvar::new(),
            queue: Condvar::new(),
            switch_after,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code holding the lock can panic halfway: the state stays consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks (call it without the GIL) until the calling thread leads, should
    /// reach for the lead, or the relay stops. `back`: the caller comes back from
    /// serving a request (not from a reach that found the leader moved on).
    pub fn wait_turn(&self, back: bool) -> Turn {
        let me = thread::current().id();
        let back_from_slow = back
            && SERVED_SINCE
                .take()
                .is_some_and(|since| since.elapsed() >= self.switch_after);
        let mut s = self.lock();
        if back_from_slow && !s.stopped && s.event.is_some() {
            self.lead_from(&mut s, me);
            return Turn::Lead;
        }
        loop {
            if s.stopped {
                if s.watcher == Some(me) {
                    s.watcher = None;
                }
                return Turn::Stopped;
            }
            if s.leader.is_none() || s.leader == Some(me) {
                // (A leader that calls again, after an error, goes on leading.)
                self.lead_from(&mut s, me);
                return Turn::Lead;
            }
            match s.watcher {
                None => s.watcher = Some(me),
                Some(watcher) if watcher != me => {
                    s = self.queue.wait(s).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                Some(_) => {}
            }
            if s.leader_idle {
                s.watcher_idle = true;
                s = self.watcher.wait(s).unwrap_or_else(|e| e.into_inner());
                s.watcher_idle = false;
                continue;
            }
            // Between two events the leader is polling or reading a head: look again
            // after switch_after (waking up only when it blocks would cost a wake-up
            // per request).
            if let Some(event) = self.overdue(&s) {
                return Turn::Reach(event); // still the watcher while it reaches
            }
            let now = Instant::now();
            let due = match &s.event {
                Some(event) => event.since + self.switch_after,
                None => now + self.switch_after,
            };
            s = self
                .watcher
                .wait_timeout(s, due - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The watcher, holding the GIL again: takes the lead if the leader is still
    /// on `event`. False: it moved on, and the caller goes back to `wait_turn`.
    pub fn depose(&self, event: u64) -> bool {
        let me = thread::current().id();
        let mut s = self.lock();
        let stuck = matches!(&s.event, Some(serving) if serving.id == event);
        if stuck && !s.stopped {
            self.lead_from(&mut s, me);
        }
        stuck && !s.stopped
    }

    /// The leader begins serving an event (from here on it may lose the lead).
    pub fn serve(&self) {
        let me = thread::current().id();
        let mut s = self.lock();
        if s.leader != Some(me) {
            return;
        }
        let since = Instant::now();
        SERVED_SINCE.set(Some(since));
        s.events += 1;
        s.event = Some(Serving {
            id: s.events,
            since,
        });
        s.leader_idle = false;
        if s.watcher_idle {
            s.watcher_idle = false;
            self.watcher.notify_one();
        }
    }

    /// The leader is done with its event: true if it still leads (poll on),
    /// false if another thread took over (wait for a turn again).
    pub fn keep_lead(&self) -> bool {
        let me = thread::current().id();
        let mut s = self.lock();
        if s.leader != Some(me) {
            return false;
        }
        s.event = None;
        true
    }

    /// The leader is about to block waiting for readiness: the watcher stops
    /// timing (and waking up) until the leader serves again.
    pub fn idle(&self) {
        let me = thread::current().id();
        let mut s = self.lock();
        if s.leader == Some(me) {
            s.leader_idle = true;
        }
    }

    /// A thread is waiting, ready to take the lead from a request that runs
    /// `switch_after` or longer (the gthread worker holds responses back only
    /// while one is).
    pub fn has_watcher(&self) -> bool {
        self.lock().watcher.is_some()
    }

    /// Every waiting thread returns `Stopped`, now and later.
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.watcher.notify_all();
        self.queue.notify_all();
    }

    /// The leader's event, if it has run for `switch_after` or longer.
    fn overdue(&self, s: &State) -> Option<u64> {
        let event = s.event.as_ref()?;
        (event.since.elapsed() >= self.switch_after).then_some(event.id)
    }

    fn lead_from(&self, s: &mut State, me: ThreadId) {
        s.take_lead(me);
        if s.watcher == Some(me) {
            // The watcher leads now: one of the queue takes its place.
            s.watcher = None;
            self.queue.notify_one();
        }
    }
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
