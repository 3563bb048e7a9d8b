//! Health probes (`--health-path`), answered by the server before any app,
//! on every loop that serves requests: hyper's service (HTTP/1.1 and HTTP/2)
//! and the direct HTTP/1.1 loops (the bridge's and the WSGI engine's).
//!
//! `PATH` and `PATH/ready` answer readiness: 200 while the worker serves,
//! 503 once it stops (`Shared::stopping`) or its master drains
//! (`--shutdown-delay`: the scoreboard's flag, read per probe,
//! `Health::watch_master`). `PATH/live` answers liveness: 200, or 503 when
//! the worker's Python loop has not ticked for a second (the accept loops'
//! own test, counters.rs), since a probe answered by tokio alone would call
//! a worker alive whose app can no longer run. The texts and fields are the
//! Python workers' (supervise/http/health.py).
//!
//! A probe is not a request: it takes no place under `--limit-concurrency`,
//! counts for no `--max-requests`, reaches no app and, unless
//! `--health-access-log`, no access log. It is counted (`take_answered`),
//! and when logged its record waits in answered.rs's queue for the tick.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{HeaderMap, StatusCode};

use super::reply::Reply;

/// The probe paths and the state their answers come from.
pub struct Health {
    paths: Option<Paths>,
    /// The master's own draining flag, in the scoreboard's shared memory
    /// (`watch_master`): read per probe, so that every worker of a master
    /// turns 503 at the same moment, not each at its next tick.
    master_flag: std::sync::atomic::AtomicPtr<std::sync::atomic::AtomicU32>,
    answered: AtomicU64,
}

struct Paths {
    ready: Box<[u8]>,
    ready_too: Box<[u8]>,
    live: Box<[u8]>,
}

/// What a probe is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ready,
    Draining,
    Live,
    Stuck,
    Method,
}

impl Answer {
    pub fn status(self) -> StatusCode {
        match self {
            Answer::Ready | Answer::Live => StatusCode::OK,
            Answer::Draining | Answer::Stuck => StatusCode::SERVICE_UNAVAILABLE,
            Answer::Method => StatusCode::METHOD_NOT_ALLOWED,
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Answer::Ready => "ready\n",
            Answer::Draining => "draining\n",
            Answer::Live => "live\n",
            Answer::Stuck => "stuck\n",
            Answer::Method => "Method Not Allowed\n",
        }
    }

    pub fn headers(self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        // A cached answer would hide the drain from the prober.
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self == Answer::Method {
            headers.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        headers
    }

    pub fn reply(self) -> Reply {
        Reply::Full {
            status: self.status(),
            headers: self.headers().into(),
            body: Bytes::from_static(self.text().as_bytes()),
        }
    }
}

impl Health {
    /// `path`: `--health-path` as the settings normalised it (no trailing
    /// slash); `None` answers no probe.
    pub fn new(path: Option<&str>) -> Health {
        Health {
            paths: path.map(|base| Paths {
                ready: base.as_bytes().into(),
                ready_too: format!("{base}/ready").into_bytes().into(),
                live: format!("{base}/live").into_bytes().into(),
            }),
            master_flag: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            answered: AtomicU64::new(0),
        }
    }

    /// Probes answered since the last call.
    pub fn take_answered(&self) -> u64 {
        self.answered.swap(0, Ordering::Relaxed)
    }

    /// Whether `path` asks for readiness (`true`) or liveness (`false`);
    /// `None`: no probe path.
    pub fn kind(&self, path: &[u8]) -> Option<bool> {
        let paths = self.paths.as_ref()?;
        if *path == *paths.ready || *path == *paths.ready_too {
            Some(true)
        } else if *path == *paths.live {
            Some(false)
        } else {
            None
        }
    }

    pub fn is_draining(&self) -> bool {
        let flag = self.master_flag.load(Ordering::Relaxed);
        // SAFETY: `watch_master`'s caller keeps the memory mapped for the
        // server's life, and the field is an aligned u32 that the master
        // stores whole.
        !flag.is_null() && unsafe { (*flag).load(Ordering::Relaxed) } != 0
    }

    /// Reads the drain flag at `address` from now on.
    ///
    /// # Safety
    /// `address` is an aligned u32 in memory that stays mapped while this
    /// server lives (the scoreboard, which a worker never unmaps).
    pub unsafe fn watch_master(&self, address: usize) {
        if address.is_multiple_of(std::mem::align_of::<std::sync::atomic::AtomicU32>()) {
            self.master_flag.store(address as *mut _, Ordering::Relaxed);
        }
    }

    /// Counts a probe answered.
    pub fn count(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a loop knows of a request it answered itself (a probe, a static
/// file), for the access log.
pub struct Probed<'a> {
    pub client: &'a str,
    pub method: &'a [u8],
    pub target: &'a [u8],
    pub version: &'static str,
    pub head_only: bool,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_methods() {
        let h = Health::new(Some("/healthz"));
        assert_eq!(h.kind(b"/healthz"), Some(true));
        assert_eq!(h.kind(b"/healthz/ready"), Some(true));
        assert_eq!(h.kind(b"/healthz/live"), Some(false));
        assert_eq!(h.kind(b"/healthz/"), None);
        assert_eq!(h.kind(b"/healthzz"), None);
        assert_eq!(h.kind(b"/"), None);
        assert_eq!(Health::new(None).kind(b"/healthz"), None);
    }

    #[test]
    fn answers() {
        assert_eq!(Answer::Draining.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(Answer::Method.headers().get(ALLOW).unwrap(), "GET, HEAD");
        assert!(Answer::Ready.headers().get(ALLOW).is_none());
    }
}
