//! The tokio runtimes of one worker (created after fork, in the worker) and
//! the handle Python holds: stop accepting, count, shut down.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::config::{RuntimeMode, ServerConfig};
use super::exchange::Dispatch;
use super::listener::{self, ListenFd};
use super::sched;

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

    fn loop_stuck(&self) -> bool {
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

pub struct Shared {
    pub config: ServerConfig,
    pub http: super::connection::Builders,
    /// Set when the listeners speak TLS.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub dispatch: Box<dyn Dispatch>,
    /// `--worker-connections`; `None`: no cap.
    pub room: Option<Arc<super::room::Room>>,
    /// `--backpressure`: one permit per request with the app; `None`: no bound.
    pub app_permits: Option<Arc<Semaphore>>,
    pub counters: Arc<Counters>,
    /// Set on a graceful stop: every response not yet sent says `Connection: close`.
    pub stopping: std::sync::atomic::AtomicBool,
    /// The same stop, for what awaits it (WebSocket sessions close with 1012).
    pub stop_rx: watch::Receiver<bool>,
}

impl Shared {
    /// Whether the response to the request numbered `ordinal` ends its
    /// HTTP/1.x connection: the worker stops, or retires after it.
    pub fn closes_after(&self, ordinal: u64) -> bool {
        let max = self.config.max_requests;
        (max > 0 && ordinal >= max) || self.stopping.load(Ordering::Acquire)
    }

    /// `--backpressure`: waits until fewer than that many requests are with
    /// the app. Requests count, not connections: an idle keep-alive
    /// connection holds no permit. The permit goes with the request's
    /// `ExchangeGuard`, so it is given back once the response is written
    /// (or the connection is gone).
    pub async fn app_permit(&self) -> Option<OwnedSemaphorePermit> {
        let permits = self.app_permits.as_ref()?;
        // Never closed, so acquiring only fails if it were.
        permits.clone().acquire_owned().await.ok()
    }

    /// `--limit-concurrency`: a new request now gets a 503.
    pub fn over_concurrency(&self) -> bool {
        let limit = self.config.limit_concurrency;
        limit > 0 && self.counters.in_flight() >= limit
    }
}

pub struct Server {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    closed: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    pub fn start(
        config: ServerConfig,
        fds: Vec<(i32, bool)>,
        dispatch: Box<dyn Dispatch>,
    ) -> io::Result<Server> {
        let tls = config
            .tls
            .as_ref()
            .map(|t| tokio_rustls::TlsAcceptor::from(super::tls::with_alpn(t, config.http)));
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            http: super::connection::Builders::new(&config),
            tls,
            room: (config.max_connections > 0)
                .then(|| super::room::Room::new(config.max_connections)),
            app_permits: (config.backpressure > 0)
                .then(|| Arc::new(Semaphore::new(config.backpressure))),
            config,
            dispatch,
            counters: Arc::default(),
            stopping: Default::default(),
            stop_rx,
        });
        let fds: Vec<ListenFd> = fds
            .into_iter()
            .map(|(fd, unix)| ListenFd { fd, unix })
            .collect();
        let (closed, _) = watch::channel(false);
        let threads = shared.config.threads.max(1);
        let runtimes = match shared.config.mode {
            RuntimeMode::St => threads,
            RuntimeMode::Mt => 1,
        };
        let mut handles = Vec::with_capacity(runtimes);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        for i in 0..runtimes {
            let rt = match shared.config.mode {
                RuntimeMode::St => tokio::runtime::Builder::new_current_thread()
                    .on_thread_start(sched::prefer_batches)
                    .enable_all()
                    .build()?,
                RuntimeMode::Mt => {
                    let (started, stopping) = (shared.clone(), shared.clone());
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(threads)
                        .thread_name("supervise-tokio")
                        .on_thread_start(move || {
                            sched::prefer_batches();
                            started.dispatch.thread_started();
                        })
                        .on_thread_stop(move || stopping.dispatch.thread_stopping())
                        .enable_all()
                        .build()?
                }
            };
            let shared = shared.clone();
            let fds = fds.clone();
            let stop = stop.subscribe();
            let mut closed = closed.subscribe();
            let ready = ready_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("supervise-rt-{i}"))
                .spawn(move || {
                    // The current-thread runtime runs here (on_thread_start
                    // covers only the threads tokio starts itself).
                    sched::prefer_batches();
                    let st = matches!(shared.config.mode, RuntimeMode::St);
                    if st {
                        shared.dispatch.thread_started();
                    }
                    let dispatch = shared.clone();
                    rt.block_on(async {
                        let started: io::Result<()> = fds
                            .iter()
                            .try_for_each(|&l| listener::spawn(l, shared.clone(), stop.clone()));
                        let failed = started.is_err();
                        let _ = ready.send(started);
                        if !failed {
                            let _ = closed.wait_for(|c| *c).await;
                        }
                    });
                    // Whatever still runs (apps past the graceful timeout) is cut off.
                    rt.shutdown_timeout(Duration::from_millis(100));
                    if st {
                        dispatch.dispatch.thread_stopping();
                    }
                })?;
            handles.push(handle);
        }
        drop(ready_tx);
        let server = Server {
            shared,
            stop,
            closed,
            threads: handles,
        };
        for _ in 0..runtimes {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    server.close();
                    return Err(e);
                }
                Err(_) => {
                    server.close();
                    return Err(io::Error::other("a runtime thread died while starting"));
                }
            }
        }
        Ok(server)
    }

    /// Graceful stop: no more accepting; idle connections close, busy ones
    /// after their current response (which says `Connection: close`).
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.stop.send_replace(true);
    }

    pub fn connections(&self) -> usize {
        self.shared.counters.connections.load(Ordering::Relaxed)
    }

    /// After `stop()`: every accept loop has ended and no connection or
    /// exchange is left, so closing cuts nothing. Read in this order (a
    /// connection is counted before its accept loop can end, an exchange
    /// before its connection) so that nothing slips between the reads.
    pub fn drained(&self) -> bool {
        let c = &self.shared.counters;
        c.accepting.load(Ordering::Acquire) == 0
            && c.connections.load(Ordering::Acquire) == 0
            && c.in_flight.load(Ordering::Acquire) == 0
    }

    pub fn in_flight(&self) -> usize {
        self.shared.counters.in_flight.load(Ordering::Relaxed)
    }

    pub fn beat(&self) {
        self.shared.counters.loop_beat();
    }

    pub fn take_requests(&self) -> u64 {
        self.shared.counters.requests.swap(0, Ordering::Relaxed)
    }

    /// Ends every runtime (connections still open are dropped) and joins
    /// their threads.
    pub fn close(mut self) {
        self.stop.send_replace(true);
        self.closed.send_replace(true);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
