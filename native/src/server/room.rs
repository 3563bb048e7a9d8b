//! `--worker-connections` on the Rust server, with the asgi worker's rule
//! for a full worker: a new connection takes the seat of the connection
//! nearest its deadline among those not in a request (idle keep-alive, a head
//! or a TLS handshake still on its way), so that a slowloris holding every
//! seat loses one connection to each new client instead of locking everyone
//! out. With every seat in a request the newcomer is answered 503.
//!
//! A seat is "waiting until" a deadline or busy. Only the HTTP/1.1 loops
//! without hyper (h1_direct.rs, wsgi/h1.rs) ever mark a seat waiting again
//! after its first request; a connection served by hyper (HTTP/2, HTTP/1.1
//! after a hand-over, WebSockets) stays busy, as the asgi worker keeps
//! WebSockets. The marks are two atomic operations per request, and a
//! connection told to go is dropped by its task (listener.rs) while it is
//! waiting, so no request is ever cut by the rule.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// In a request (or on hyper): never chosen.
const BUSY: u64 = 0;
/// Chosen to make room: the connection ends at its next poll.
const EVICTED: u64 = u64::MAX;
/// Waiting with no deadline (no timeouts configured): chosen last.
const NO_DEADLINE: u64 = u64::MAX - 1;
/// In a request whose client has closed its side: chosen first. Without it,
/// the connections of a client that left in the middle of slow requests kept
/// their seats until the app finished, and newcomers took each other's seats
/// meanwhile (wrk run twice on a 100 ms route at the default cap: 739 reads
/// cut in the second run).
const LEAVING: u64 = 1;
/// `index` of a seat no longer in the room.
const GONE: usize = usize::MAX;
/// Choices that lose their race with the connection going busy, before the
/// newcomer is refused instead.
const TRIES: usize = 3;

pub struct Room {
    max: usize,
    /// Deadlines are kept as milliseconds after this (plus two: never BUSY or
    /// LEAVING).
    base: Instant,
    seats: Mutex<Vec<Arc<Seat>>>,
}

/// One connection's place in the room.
#[derive(Debug)]
pub struct Seat {
    state: AtomicU64,
    /// Where the seat is in `Room::seats`; changed only under its lock.
    index: AtomicUsize,
    /// The connection task's waker, to end it when its seat is given away.
    task: Mutex<Option<Waker>>,
    base: Instant,
}

/// What a connection gets once its protocol is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Serve,
    /// 503: every seat is in a request (full.rs).
    TooMany,
}

/// What a new connection gets.
pub enum Admission {
    Seated(Ticket),
    /// Every seat is in a request.
    Full,
}

/// A seat, given back when the connection ends.
pub struct Ticket {
    room: Arc<Room>,
    pub seat: Arc<Seat>,
}

impl Room {
    /// `max` connections at once (more than zero).
    pub fn new(max: usize) -> Arc<Room> {
        Arc::new(Room {
            max,
            base: Instant::now(),
            seats: Mutex::new(Vec::with_capacity(max.min(4096))),
        })
    }

    /// A seat for a connection just accepted, waiting `first` for its first
    /// request; at `max`, the waiting connection nearest its deadline is told
    /// to go for it.
    pub fn admit(self: &Arc<Room>, first: Option<Duration>) -> Admission {
        let seat = Arc::new(Seat {
            state: AtomicU64::new(BUSY),
            index: AtomicUsize::new(GONE),
            task: Mutex::new(None),
            base: self.base,
        });
        seat.wait(first.map(|d| Instant::now() + d));
        let mut seats = self.seats.lock().unwrap_or_else(|e| e.into_inner());
        if seats.len() >= self.max && !evict_one(&mut seats) {
            return Admission::Full;
        }
        seat.index.store(seats.len(), Ordering::Relaxed);
        seats.push(seat.clone());
        Admission::Seated(Ticket {
            room: self.clone(),
            seat,
        })
    }
}

/// Tells the waiting connection nearest its deadline to go, and takes its
/// seat out; false when every seat is busy.
fn evict_one(seats: &mut Vec<Arc<Seat>>) -> bool {
    for _ in 0..TRIES {
        let victim = seats
            .iter()
            .map(|s| (s.state.load(Ordering::Acquire), s))
            .filter(|(state, _)| *state != BUSY && *state != EVICTED)
            .min_by_key(|(state, _)| *state);
        let Some((state, victim)) = victim else {
            return false;
        };
        // Lost when the connection went busy meanwhile: choose again.
        let won = victim
            .state
            .compare_exchange(state, EVICTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            let victim = victim.clone();
            remove(seats, &victim);
            let task = victim.task.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(task) = task {
                task.wake();
            }
            return true;
        }
    }
    false
}

fn remove(seats: &mut Vec<Arc<Seat>>, seat: &Seat) {
    let at = seat.index.swap(GONE, Ordering::Relaxed);
    if at == GONE {
        return;
    }
    seats.swap_remove(at);
    if let Some(moved) = seats.get(at) {
        moved.index.store(at, Ordering::Relaxed);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut seats = self.room.seats.lock().unwrap_or_else(|e| e.into_inner());
        remove(&mut seats, &self.seat);
    }
}

impl Seat {
    /// Waiting for a request (or the rest of its head) until `deadline`;
    /// false once the seat was given away.
    pub fn wait(&self, deadline: Option<Instant>) -> bool {
        let until = match deadline {
            Some(at) => (at - self.base).as_millis() as u64 + 2,
            None => NO_DEADLINE,
        };
        self.set(until.min(NO_DEADLINE))
    }

    /// In a request from now on; false once the seat was given away (the
    /// connection must then end without serving it).
    pub fn busy(&self) -> bool {
        self.set(BUSY)
    }

    /// The client closed its side while its request is served: the first
    /// seat to give away when the worker is full (a half-closed client that
    /// still reads is served as before while there is room).
    pub fn leaving(&self) -> bool {
        self.set(LEAVING)
    }

    fn set(&self, to: u64) -> bool {
        let mut now = self.state.load(Ordering::Acquire);
        loop {
            if now == EVICTED {
                return false;
            }
            match self
                .state
                .compare_exchange(now, to, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
    }

    /// `connection` until it ends or the seat goes to a newer connection.
    pub fn hold<F: Future<Output = ()>>(&self, connection: F) -> SeatedConnection<'_, F> {
        SeatedConnection {
            seat: self,
            connection,
            registered: false,
        }
    }

    fn evicted(&self) -> bool {
        self.state.load(Ordering::Acquire) == EVICTED
    }
}

pin_project_lite::pin_project! {
    /// A connection that ends when its seat is given away. Each poll costs
    /// one atomic load: the task's waker is kept once, at the first poll,
    /// since it is the root future of its task and a task's waker does not
    /// change (a `Notify` would take its lock at every wake of the task,
    /// several per request).
    pub struct SeatedConnection<'a, F> {
        seat: &'a Seat,
        #[pin]
        connection: F,
        registered: bool,
    }
}

impl<F: Future<Output = ()>> Future for SeatedConnection<'_, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if !*this.registered {
            *this.seat.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            *this.registered = true;
        }
        // After the waker is kept: an eviction either sees it or is seen here.
        if this.seat.evicted() {
            return Poll::Ready(());
        }
        this.connection.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seated(room: &Arc<Room>, first: Option<Duration>) -> Ticket {
        match room.admit(first) {
            Admission::Seated(held) => held,
            Admission::Full => panic!("no seat"),
        }
    }

    #[tokio::test]
    async fn a_full_room_gives_the_nearest_deadline_away() {
        let room = Room::new(2);
        let late = seated(&room, Some(Duration::from_secs(20)));
        let soon = seated(&room, Some(Duration::from_secs(5)));
        let new = seated(&room, Some(Duration::from_secs(10)));
        let pending = soon.seat.hold(std::future::pending());
        tokio::time::timeout(Duration::from_secs(1), pending)
            .await
            .expect("the nearest deadline goes");
        assert!(!soon.seat.busy() && !soon.seat.wait(None));
        assert!(late.seat.busy() && new.seat.wait(None));
        drop(soon); // its seat was already taken: no second removal
        assert_eq!(room.seats.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn an_eviction_wakes_the_connection_it_ends() {
        let room = Room::new(1);
        let first = seated(&room, Some(Duration::from_secs(5)));
        let seat = first.seat.clone();
        let connection = tokio::spawn(async move { seat.hold(std::future::pending()).await });
        tokio::task::yield_now().await; // its first poll: the waker is kept
        let _second = seated(&room, None);
        tokio::time::timeout(Duration::from_secs(1), connection)
            .await
            .expect("woken by the eviction")
            .unwrap();
    }

    #[tokio::test]
    async fn a_client_that_left_mid_request_goes_before_any_waiting_one() {
        let room = Room::new(2);
        let waiting = seated(&room, Some(Duration::from_millis(1)));
        let left = seated(&room, None);
        assert!(left.seat.busy() && left.seat.leaving());
        assert!(matches!(room.admit(None), Admission::Seated(_)));
        assert!(left.seat.evicted());
        assert!(!waiting.seat.evicted());
    }

    #[tokio::test]
    async fn busy_seats_are_kept_and_the_newcomer_refused() {
        let room = Room::new(1);
        let first = seated(&room, None);
        assert!(first.seat.busy());
        assert!(matches!(room.admit(None), Admission::Full));
        drop(first);
        let second = seated(&room, None);
        assert_eq!(second.seat.index.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn seats_leave_from_the_middle() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _entered = rt.enter();
        let room = Room::new(3);
        let a = seated(&room, None);
        let b = seated(&room, None);
        let c = seated(&room, None);
        drop(a);
        assert_eq!(c.seat.index.load(Ordering::Relaxed), 0);
        drop(b);
        drop(c);
        assert!(room.seats.lock().unwrap().is_empty());
    }
}
