//! What the server answers itself, with no app call to log it or count its
//! status: health probes (health.rs, when `--health-access-log`) and static
//! files (`--static-map`, when the access log or the metrics want them).
//! Their records wait here for the worker's tick (every 0.1 s), which writes
//! the access lines and the metrics in Python. The queue is bounded: past
//! it, records are counted as dropped, never stored, so a flood of such
//! requests cannot grow the worker while its loop is busy.

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

#[derive(Default)]
pub struct AnsweredLog {
    queue: Mutex<(VecDeque<Answered>, u64)>,
}

impl AnsweredLog {
    pub fn push(&self, record: impl FnOnce() -> Answered) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if queue.0.len() < QUEUE {
            queue.0.push_back(record());
        } else {
            queue.1 += 1;
        }
    }

    /// The records since the last call, and how many did not fit.
    pub fn take(&self) -> (Vec<Answered>, u64) {
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
