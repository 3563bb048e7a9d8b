//! The tokio runtimes of one worker (created after fork, in the worker) and
//! the handle Python holds: stop accepting, count, shut down.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use super::config::{RuntimeMode, ServerConfig};
use super::dispatch::Dispatch;
use super::listener::{self, ListenFd};
use super::sched;
use super::shared::Shared;

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
        let health = super::health::Health::new(config.health_path.as_deref());
        let shared = Arc::new(Shared {
            http: super::hyper_builders::Builders::new(&config),
            tls,
            room: (config.max_connections > 0)
                .then(|| super::room::Room::new(config.max_connections)),
            app_permits: (config.backpressure > 0)
                .then(|| Arc::new(Semaphore::new(config.backpressure))),
            config,
            dispatch,
            counters: Arc::default(),
            health,
            answered: Default::default(),
            dropped: Default::default(),
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
            // One quinn endpoint per socket, on the first runtime: its
            // connections' tasks are spawned where it runs.
            let quic = if i == 0 {
                shared.config.quic.clone()
            } else {
                Vec::new()
            };
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
                            .try_for_each(|&l| listener::spawn(l, shared.clone(), stop.clone()))
                            .and_then(|()| {
                                quic.iter().try_for_each(|&q| {
                                    super::h3::spawn(q, shared.clone(), stop.clone())
                                })
                            });
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
        self.shared.counters.open()
    }

    /// After `stop()`: every accept loop has ended and no connection or
    /// exchange is left, so closing cuts nothing. Read in this order (a
    /// connection is counted before its accept loop can end, an exchange
    /// before its connection) so that nothing slips between the reads.
    pub fn drained(&self) -> bool {
        self.shared.counters.drained()
    }

    pub fn in_flight(&self) -> usize {
        self.shared.counters.in_flight()
    }

    pub fn beat(&self) {
        self.shared.counters.loop_beat();
    }

    pub fn take_requests(&self) -> u64 {
        self.shared.counters.take_requests()
    }

    /// `--health-path`'s probes and their drain flag.
    pub fn health(&self) -> &super::health::Health {
        &self.shared.health
    }

    /// The requests the server answered itself, for the access log and metrics.
    pub fn answered(&self) -> &super::answered::AnsweredLog {
        &self.shared.answered
    }

    /// The clients dropped for not reading, for the worker's log.
    pub fn dropped(&self) -> &super::answered::DroppedLog {
        &self.shared.dropped
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
