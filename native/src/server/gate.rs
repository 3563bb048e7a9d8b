//! The request gate: the rules every loop that serves requests applies to
//! each one, decided here once. hyper's service (service.rs) and the direct
//! HTTP/1.1 loop (direct_http1.rs) let a request in through `let_in`:
//! `--limit-concurrency` first (past it, a 503 and nothing else), then
//! `--backpressure` (the request waits, unread by the app, for a permit),
//! the request counted in flight from the moment it passes the first test,
//! so that a waiting one counts for the limit and for a graceful stop.
//! After it, every HTTP/1.x loop (the WSGI engine's wsgi/direct_http1.rs too) asks
//! `closes_after` whether its connection ends with this response. Before
//! all of it, `probe` tells a `--health-path` probe apart (health.rs): it
//! is answered by the loop itself and passes none of these rules.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use super::answered::Answered;
use super::body::ExchangeGuard;
use super::exchange::{ConnInfo, Tracker};
use super::health::{Answer, Probed};
use super::shared::Shared;
use crate::static_files::{Decision, StaticAnswer, StaticRequest};

/// What a request past `--limit-concurrency` is answered.
pub const BUSY: (hyper::StatusCode, &str) = (
    hyper::StatusCode::SERVICE_UNAVAILABLE,
    "Service Unavailable",
);

impl Shared {
    /// The request in, counted, with its `--backpressure` permit once it
    /// has one; `None` when it must be answered `BUSY` instead.
    pub async fn let_in(
        &self,
        tracker: Arc<Tracker>,
        conn: Arc<ConnInfo>,
    ) -> Option<ExchangeGuard> {
        if self.over_concurrency() {
            return None;
        }
        let mut guard = ExchangeGuard::new(tracker, self.counters.clone(), conn);
        guard.admit(self.app_permit().await);
        Some(guard)
    }

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
    async fn app_permit(&self) -> Option<OwnedSemaphorePermit> {
        let permits = self.app_permits.as_ref()?;
        // Never closed, so acquiring only fails if it were.
        permits.clone().acquire_owned().await.ok()
    }

    /// `--limit-concurrency`: a new request now gets a 503.
    fn over_concurrency(&self) -> bool {
        let limit = self.config.limit_concurrency;
        limit > 0 && self.counters.in_flight() >= limit
    }
}

impl Shared {
    /// The answer to a request for `path` (undecoded, without the query);
    /// `None` when it is no probe path and the app gets it.
    pub fn probe(&self, method: &[u8], path: &[u8]) -> Option<Answer> {
        let health = &self.health;
        let ready = health.kind(path)?;
        Some(if method != b"GET" && method != b"HEAD" {
            Answer::Method
        } else if !ready {
            if self.counters.loop_stuck() {
                Answer::Stuck
            } else {
                Answer::Live
            }
        } else if self.stopping.load(Ordering::Acquire) || health.is_draining() {
            Answer::Draining
        } else {
            Answer::Ready
        })
    }

    /// Counts a probe answered, and queues its record when the access log
    /// wants probes (`--health-access-log`).
    pub fn probed(&self, answer: Answer, p: Probed<'_>) {
        self.health.count();
        if self.config.health_access_log {
            self.answered.push(|| {
                answered(
                    &p,
                    answer.status().as_u16(),
                    answer.text().len() as u64,
                    0.0,
                    true,
                )
            });
        }
    }

    /// Whether a direct HTTP/1.1 loop may answer `h` itself (a probe path,
    /// a path under a static prefix): one or two comparisons, so that the
    /// common request never enters that path.
    pub fn may_answer_itself(&self, h: &crate::http1_codec::RequestHead) -> bool {
        let path = h.raw_path();
        self.health.kind(path).is_some()
            || self
                .config
                .static_files
                .as_ref()
                .is_some_and(|files| files.claims(path))
    }

    /// A static file's answer (`--static-map`), or `None` when the request
    /// is the app's: not under a mount, or a missing file falling through.
    pub fn static_answer(&self, req: &StaticRequest<'_>) -> Option<StaticAnswer> {
        let files = self.config.static_files.as_ref()?;
        if !files.claims(req.raw_path) {
            return None;
        }
        match files.decide(req) {
            Decision::App => None,
            Decision::Answer(answer) => Some(answer),
        }
    }

    /// A static answer written (or cut off): queued for the access log and
    /// the metrics when they want it (the request itself was counted by the
    /// loop, as any).
    pub fn served_static(&self, p: Probed<'_>, status: u16, sent: u64, seconds: f64) {
        if self.config.log_answered {
            self.answered
                .push(|| answered(&p, status, sent, seconds, false));
        }
    }
}

fn answered(p: &Probed<'_>, status: u16, body: u64, seconds: f64, probe: bool) -> Answered {
    Answered {
        client: p.client.to_owned(),
        method: String::from_utf8_lossy(p.method).into_owned(),
        target: String::from_utf8_lossy(p.target).into_owned(),
        version: p.version,
        status,
        sent: if p.head_only { 0 } else { body },
        seconds,
        referer: p.referer.map(|r| String::from_utf8_lossy(r).into_owned()),
        user_agent: p
            .user_agent
            .map(|u| String::from_utf8_lossy(u).into_owned()),
        probe,
    }
}
