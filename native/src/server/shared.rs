//! What every task of one server shares: the config, the protocol builders,
//! the dispatcher, the limits' state and the counters. Made once by
//! `Server::start` (runtime.rs); the request rules over it are gate.rs's.

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use super::config::ServerConfig;
use super::counters::Counters;
use super::dispatch::Dispatch;

pub struct Shared {
    pub config: ServerConfig,
    pub http: super::hyper_builders::Builders,
    /// Set when the listeners speak TLS.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub dispatch: Box<dyn Dispatch>,
    /// `--worker-connections`; `None`: no cap.
    pub room: Option<Arc<super::room::Room>>,
    /// `--backpressure`: one permit per request with the app; `None`: no bound.
    pub app_permits: Option<Arc<Semaphore>>,
    pub counters: Arc<Counters>,
    /// `--health-path`: the probe paths, the drain flag, the probes answered.
    pub health: super::health::Health,
    /// What the server answered itself, waiting for the worker's tick.
    pub answered: super::answered::AnsweredLog,
    /// Clients dropped for not reading, for the worker's log.
    pub dropped: super::answered::DroppedLog,
    /// Set on a graceful stop: every response not yet sent says `Connection: close`.
    pub stopping: std::sync::atomic::AtomicBool,
    /// The same stop, for what awaits it (WebSocket sessions close with 1012).
    pub stop_rx: watch::Receiver<bool>,
}
