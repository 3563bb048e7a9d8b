//! `--worker-connections` on the Rust server. At the cap the accept loops
//! stop accepting, so that newcomers wait in the listen backlog (gthread's
//! and Granian's meaning of the bound), unless a seat can be given away: a
//! connection that has waited on its client for at least GRACE without a
//! complete request (idle keep-alive, a head or a TLS handshake still on its
//! way), nearest its deadline first, or one whose client left during its
//! request. A slowloris holding every seat then loses one connection to each
//! new client instead of locking everyone out for its header_timeout.
//!
//! GRACE is what makes the rule lose nothing: a connection that has just
//! connected or just got its response may have its request on the wire, or
//! already in its socket while the server was busy elsewhere. Giving such a
//! seat away at once cut requests that had been sent: twelve clients that
//! connect and then send, at `--worker-connections 2`, lost up to three.
//! Before it, a newcomer found nobody to displace and was answered 503;
//! it now waits its turn in the backlog, as on gthread.
//!
//! A seat is "waiting since" a time, until a deadline, or busy. A new seat
//! is busy until its task runs (listener.rs marks it waiting then), so that
//! a connection the server has not looked at yet is never chosen. Only the
//! HTTP/1.1 loops without hyper (direct_http1.rs, wsgi/direct_http1.rs) mark a seat
//! waiting again after its first request; a connection served by hyper
//! (HTTP/2, HTTP/1.1 after a hand-over, WebSockets) stays busy. The marks
//! are a clock read and two atomic stores per request, and a connection told
//! to go is dropped by its task while it is waiting, so no request is ever
//! cut once its head was read.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a connection waits on its client before its seat may go.
const GRACE: Duration = Duration::from_secs(1);
/// In a request (or on hyper, or not looked at yet): never chosen.
const BUSY: u64 = 0;
/// Chosen to make room: the connection ends at its next poll.
const EVICTED: u64 = u64::MAX;
/// Waiting with no deadline (no timeouts configured): chosen last.
const NO_DEADLINE: u64 = u64::MAX - 1;
/// In a request whose client has closed its side: chosen first, without
/// GRACE. Without it, the connections of a client that left in the middle of
/// slow requests kept their seats until the app finished, and newcomers took
/// each other's seats meanwhile (wrk run twice on a 100 ms route at the
/// default cap: 739 reads cut in the second run).
const LEAVING: u64 = 1;
/// `index` of a seat no longer in the room.
const GONE: usize = usize::MAX;
/// Choices that lose their race with the connection going busy, before the
/// newcomer waits instead.
const TRIES: usize = 3;

pub struct Room {
    max: usize,
    /// Times are kept as milliseconds after this (deadlines plus two: never
    /// BUSY or LEAVING).
    base: Instant,
    seats: Mutex<Vec<Arc<Seat>>>,
    /// Told when a seat leaves a full room: the accept loops go on.
    freed: Notify,
}

/// One connection's place in the room.
#[derive(Debug)]
pub struct Seat {
    state: AtomicU64,
    /// When its connection began to wait on its client (ms after `base`).
    since: AtomicU64,
    /// Where the seat is in `Room::seats`; changed only under its lock.
    index: AtomicUsize,
    /// The connection task's waker, to end it when its seat is given away.
    task: Mutex<Option<Waker>>,
    base: Instant,
}

/// What a new connection gets.
pub enum Admission {
    Seated(Ticket),
    /// No seat free or to give away (the one the accept loop saw went busy).
    Full,
}

/// A seat, given back when the connection ends.
pub struct Ticket {
    room: Arc<Room>,
    pub seat: Arc<Seat>,
    /// The seat was another connection's, which ends when its task runs next.
    pub displaced: bool,
}

/// When a newcomer can be seated.
enum Place {
    Now,
    /// Once the first waiting seat has waited GRACE.
    At(Instant),
    /// Every seat is busy.
    Never,
}

impl Room {
    /// `max` connections at once (more than zero).
    pub fn new(max: usize) -> Arc<Room> {
        Arc::new(Room {
            max,
            base: Instant::now(),
            seats: Mutex::new(Vec::with_capacity(max.min(4096))),
            freed: Notify::new(),
        })
    }

    /// A busy seat for a connection just accepted (its task marks it waiting
    /// when it runs); at `max`, a seat that may go is given away for it.
    pub fn admit(self: &Arc<Room>) -> Admission {
        let seat = Arc::new(Seat {
            state: AtomicU64::new(BUSY),
            since: AtomicU64::new(0),
            index: AtomicUsize::new(GONE),
            task: Mutex::new(None),
            base: self.base,
        });
        let mut seats = self.seats.lock().unwrap_or_else(|e| e.into_inner());
        let displaced = seats.len() >= self.max;
        if displaced && !evict_one(&mut seats, self.ms(Instant::now())) {
            return Admission::Full;
        }
        seat.index.store(seats.len(), Ordering::Relaxed);
        seats.push(seat.clone());
        Admission::Seated(Ticket {
            room: self.clone(),
            seat,
            displaced,
        })
    }

    /// Resolves once `admit` would seat a newcomer. While the room is full
    /// of busy seats, one may turn waiting unseen: looked at again after GRACE.
    pub async fn vacancy(&self) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let at = match self.place() {
                Place::Now => return,
                Place::At(at) => at,
                Place::Never => Instant::now() + GRACE,
            };
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep_until(at) => {}
            }
        }
    }

    fn place(&self) -> Place {
        let seats = self.seats.lock().unwrap_or_else(|e| e.into_inner());
        if seats.len() < self.max {
            return Place::Now;
        }
        let now = self.ms(Instant::now());
        let first = seats.iter().filter_map(|s| s.free_from()).min();
        match first {
            None => Place::Never,
            Some(at) if at <= now => Place::Now,
            Some(at) => Place::At(self.base + Duration::from_millis(at)),
        }
    }

    fn ms(&self, at: Instant) -> u64 {
        (at - self.base).as_millis() as u64
    }
}

/// Tells the waiting connection nearest its deadline among those that may go
/// to go, and takes its seat out; false when there is none.
fn evict_one(seats: &mut Vec<Arc<Seat>>, now: u64) -> bool {
    for _ in 0..TRIES {
        let victim = seats
            .iter()
            .filter(|s| s.free_from().is_some_and(|at| at <= now))
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
        let was_full = seats.len() >= self.room.max;
        remove(&mut seats, &self.seat);
        drop(seats);
        if was_full {
            self.room.freed.notify_waiters();
        }
    }
}

impl Seat {
    /// Waiting on the client from `now` until `deadline`; false once the
    /// seat was given away.
    pub fn wait(&self, now: Instant, deadline: Option<Instant>) -> bool {
        let until = match deadline {
            Some(at) => (at - self.base).as_millis() as u64 + 2,
            None => NO_DEADLINE,
        };
        self.since
            .store((now - self.base).as_millis() as u64, Ordering::Relaxed);
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

    /// From when (ms after `base`) the seat may be given away; None while busy.
    fn free_from(&self) -> Option<u64> {
        match self.state.load(Ordering::Acquire) {
            BUSY | EVICTED => None,
            LEAVING => Some(0),
            _ => Some(self.since.load(Ordering::Relaxed) + GRACE.as_millis() as u64),
        }
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

    fn seated(room: &Arc<Room>) -> Ticket {
        match room.admit() {
            Admission::Seated(held) => held,
            Admission::Full => panic!("no seat"),
        }
    }

    /// Seated, waiting since now until `for_` from now.
    fn waiting(room: &Arc<Room>, for_: Option<Duration>) -> Ticket {
        let ticket = seated(room);
        let now = Instant::now();
        assert!(ticket.seat.wait(now, for_.map(|d| now + d)));
        ticket
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_room_gives_away_the_nearest_deadline_once_it_waited_grace() {
        let room = Room::new(2);
        let late = waiting(&room, Some(Duration::from_secs(20)));
        let soon = waiting(&room, Some(Duration::from_secs(5)));
        // Both may have their request on the wire: nobody goes yet.
        assert!(matches!(room.admit(), Admission::Full));
        tokio::time::advance(GRACE).await;
        let new = seated(&room);
        let pending = soon.seat.hold(std::future::pending());
        tokio::time::timeout(Duration::from_secs(1), pending)
            .await
            .expect("the nearest deadline goes");
        assert!(!soon.seat.busy() && !soon.seat.wait(Instant::now(), None));
        assert!(late.seat.busy() && new.seat.wait(Instant::now(), None));
        drop(soon); // its seat was already taken: no second removal
        assert_eq!(room.seats.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_seat_not_looked_at_yet_is_never_given_away() {
        let room = Room::new(1);
        let _unread = seated(&room); // busy until its task marks it waiting
        tokio::time::advance(GRACE * 10).await;
        assert!(matches!(room.admit(), Admission::Full));
    }

    #[tokio::test(start_paused = true)]
    async fn an_eviction_wakes_the_connection_it_ends() {
        let room = Room::new(1);
        let first = waiting(&room, Some(Duration::from_secs(5)));
        let seat = first.seat.clone();
        let connection = tokio::spawn(async move { seat.hold(std::future::pending()).await });
        tokio::task::yield_now().await; // its first poll: the waker is kept
        tokio::time::advance(GRACE).await;
        let _second = seated(&room);
        tokio::time::timeout(Duration::from_secs(1), connection)
            .await
            .expect("woken by the eviction")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_left_mid_request_goes_at_once_and_first() {
        let room = Room::new(2);
        let waiting_one = waiting(&room, Some(Duration::from_millis(1)));
        tokio::time::advance(GRACE).await;
        let left = seated(&room);
        assert!(left.seat.leaving());
        assert!(matches!(room.admit(), Admission::Seated(_)));
        assert!(left.seat.evicted());
        assert!(!waiting_one.seat.evicted());
    }

    #[tokio::test(start_paused = true)]
    async fn vacancy_waits_for_a_seat_to_free_or_to_have_waited_grace() {
        let room = Room::new(1);
        let busy = seated(&room);
        let started = Instant::now();
        let freed = {
            let room = room.clone();
            tokio::spawn(async move { room.vacancy().await })
        };
        tokio::time::sleep(GRACE * 3).await;
        assert!(!freed.is_finished(), "every seat is busy");
        drop(busy);
        freed.await.unwrap();
        assert_eq!(Instant::now() - started, GRACE * 3, "told at once");

        let idle = waiting(&room, None);
        let at = Instant::now();
        room.vacancy().await;
        assert_eq!(
            Instant::now() - at,
            GRACE,
            "once the idle seat waited GRACE"
        );
        drop(idle);
    }

    #[tokio::test]
    async fn busy_seats_are_kept_and_the_newcomer_turned_away() {
        let room = Room::new(1);
        let first = seated(&room);
        assert!(first.seat.busy());
        assert!(matches!(room.admit(), Admission::Full));
        drop(first);
        let second = seated(&room);
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
        let a = seated(&room);
        let b = seated(&room);
        let c = seated(&room);
        drop(a);
        assert_eq!(c.seat.index.load(Ordering::Relaxed), 0);
        drop(b);
        drop(c);
        assert!(room.seats.lock().unwrap().is_empty());
    }
}
