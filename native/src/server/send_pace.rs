//! `--send-min-rate`: the slowest a client may take a response.
//!
//! `--send-timeout` alone drops a client that takes nothing for that long;
//! one that takes a few bytes now and then would keep its connection, and
//! what we buffered for it, as long as it likes. This is the floor under it,
//! counted only while a write waits for the client to make room (the app's
//! own time is not the client's fault): once the waits add up to the send
//! timeout, the client must have taken `min_rate` bytes for each second of
//! them, or it is dropped; otherwise a new window starts.
//!
//! "Taken" is what the socket accepted, which lags what the client read by
//! at most the buffers in between. The rule reads no clock itself (the
//! caller gives it the waits' lengths), as supervise/http/send_pace.py, its
//! twin for the Python classes.

use std::time::Duration;

/// The floor of one stream: bytes taken against time waited.
#[derive(Debug)]
pub struct SendPace {
    window: Duration,
    min_rate: u64,
    waited: Duration,
    /// The part of the wait in progress that an earlier window already
    /// counted, taken off when that wait ends.
    counted: Duration,
    taken: u64,
}

impl SendPace {
    /// `None` where either setting switches the floor off.
    pub fn new(window: Option<Duration>, min_rate: u64) -> Option<SendPace> {
        let window = window.filter(|w| !w.is_zero())?;
        (min_rate > 0).then_some(SendPace {
            window,
            min_rate,
            waited: Duration::ZERO,
            counted: Duration::ZERO,
            taken: 0,
        })
    }

    pub fn took(&mut self, count: usize) {
        self.taken = self.taken.saturating_add(count as u64);
    }

    /// A wait that lasted `length` is over.
    pub fn wait_ended(&mut self, length: Duration) {
        self.waited += length.saturating_sub(self.counted);
        self.counted = Duration::ZERO;
    }

    /// Whether the window is over and the client fell under the floor;
    /// `waiting`: how long the wait in progress has lasted so far.
    pub fn too_slow(&mut self, waiting: Duration) -> bool {
        let total = self.waited + waiting.saturating_sub(self.counted);
        if total < self.window {
            return false;
        }
        let owed = total.as_secs_f64() * self.min_rate as f64;
        if (self.taken as f64) < owed {
            return true;
        }
        self.waited = Duration::ZERO;
        self.counted = waiting;
        self.taken = 0;
        false
    }

    /// When the wait in progress must be looked at again: where the window
    /// ends, so a client taking nothing faster than the floor is not kept
    /// beyond it.
    pub fn window_left(&self, waiting: Duration) -> Duration {
        self.window
            .saturating_sub(self.waited + waiting.saturating_sub(self.counted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn pace() -> SendPace {
        SendPace::new(Some(10 * S), 100).expect("a floor")
    }

    #[test]
    fn off_when_either_setting_is_zero() {
        assert!(SendPace::new(None, 100).is_none());
        assert!(SendPace::new(Some(Duration::ZERO), 100).is_none());
        assert!(SendPace::new(Some(S), 0).is_none());
    }

    #[test]
    fn a_client_under_the_floor_is_too_slow_once_the_waits_fill_the_window() {
        let mut pace = pace();
        for _ in 0..3 {
            pace.took(200);
            pace.wait_ended(3 * S);
            assert!(!pace.too_slow(Duration::ZERO));
        }
        pace.took(200);
        pace.wait_ended(3 * S);
        // 12 s waited, 800 bytes taken: under 100 a second.
        assert!(pace.too_slow(Duration::ZERO));
    }

    #[test]
    fn a_client_over_the_floor_starts_a_new_window() {
        let mut pace = pace();
        pace.took(2_000);
        pace.wait_ended(11 * S);
        assert!(!pace.too_slow(Duration::ZERO));
        // The new window counts from nothing: a long silence is judged alone.
        pace.wait_ended(11 * S);
        assert!(pace.too_slow(Duration::ZERO));
    }

    #[test]
    fn a_wait_in_progress_counts_and_is_not_counted_twice() {
        let mut pace = pace();
        pace.took(5_000);
        assert!(!pace.too_slow(12 * S));
        // The window closed 12 s into this wait; its end adds only the rest.
        pace.wait_ended(14 * S);
        assert!(!pace.too_slow(Duration::ZERO));
        assert_eq!(pace.window_left(Duration::ZERO), 8 * S);
    }
}
