//! What the server answers itself, with no app call to log it or count its
//! status: health probes (health.rs, when `--health-access-log`) and static
//! files (`--static-map`, when the access log or the metrics want them);
//! and the clients it dropped for not reading (`--send-timeout`,
//! `--send-min-rate`). Their records wait here for the worker's tick (every
//! 0.1 s), which writes the access lines, the log and the metrics in
//! Python. The queue is bounded: past it, records are counted as dropped,
//! never stored, so a flood cannot grow the worker while its loop is busy.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Records kept for one tick at most: 20,000 a second, past what a Python
/// access logger writes anyway.
const QUEUE: usize = 2048;

/// One request the server answered, as the access log and metrics read it.
pub struct Answered {
    pub client: String,
    pub method: String,
    pub target: String,
    pub version: &'static str,
    pub status: u16,
    /// Body bytes (0 for HEAD).
    pub sent: u64,
    pub seconds: f64,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
    /// A health probe: logged only, not counted as a request.
    pub probe: bool,
}

/// A client whose connection the server gave up on, and why.
pub struct Dropped {
    pub client: String,
    pub why: &'static str,
}

pub type AnsweredLog = TickQueue<Answered>;
pub type DroppedLog = TickQueue<Dropped>;

/// Records for the next tick, at most `QUEUE` of them.
pub struct TickQueue<T> {
    queue: Mutex<(VecDeque<T>, u64)>,
}

impl<T> Default for TickQueue<T> {
    fn default() -> Self {
        TickQueue {
            queue: Mutex::new((VecDeque::new(), 0)),
        }
    }
}

impl<T> TickQueue<T> {
    pub fn push(&self, record: impl FnOnce() -> T) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if queue.0.len() < QUEUE {
            queue.0.push_back(record());
        } else {
            queue.1 += 1;
        }
    }

    /// The records since the last call, and how many did not fit.
    pub fn take(&self) -> (Vec<T>, u64) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = std::mem::take(&mut queue.1);
        (queue.0.drain(..).collect(), dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Answered {
        Answered {
            client: String::new(),
            method: "GET".into(),
            target: "/".into(),
            version: "HTTP/1.1",
            status: 200,
            sent: 0,
            seconds: 0.0,
            referer: None,
            user_agent: None,
            probe: false,
        }
    }

    #[test]
    fn bounded() {
        let log = AnsweredLog::default();
        for _ in 0..QUEUE + 3 {
            log.push(record);
        }
        let (records, dropped) = log.take();
        assert_eq!((records.len(), dropped), (QUEUE, 3));
        assert_eq!(log.take().0.len(), 0);
    }
}
