//! `RequestCounts`: the asgi worker's count of the requests its apps are
//! serving and have served, kept where the request's end is (the native
//! `AppRun`), so a request costs the worker no Python call to count it.
//!
//! The worker takes the served count at each tick for its scoreboard; a
//! worker that must retire after `max_requests` is told the moment the
//! count reaches it (`on_due`), as it was when every request called it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use pyo3::prelude::*;

#[pyclass(module = "supervise._native", frozen)]
pub struct RequestCounts {
    in_flight: AtomicU32,
    /// Served since the worker last took the count.
    done: AtomicU64,
    /// How many more `done` reaches before `on_due` is called.
    due: AtomicU64,
    on_due: Py<PyAny>,
}

impl RequestCounts {
    /// An app call began.
    pub(crate) fn started(&self) {
        self.in_flight.fetch_add(1, Relaxed);
    }

    /// An app call ended.
    pub(crate) fn ended(&self, py: Python<'_>) {
        self.in_flight.fetch_sub(1, Relaxed);
        self.served(py);
    }

    fn served(&self, py: Python<'_>) {
        let done = self.done.fetch_add(1, Relaxed) + 1;
        if done == self.due.load(Relaxed) {
            if let Err(err) = self.on_due.call0(py) {
                err.write_unraisable(py, Some(self.on_due.bind(py)));
            }
        }
    }
}

#[pymethods]
impl RequestCounts {
    /// `on_due()` is called when `due` requests have been served since the
    /// start (it takes the count, as the tick does).
    #[new]
    #[pyo3(signature = (*, due, on_due))]
    fn new(due: u64, on_due: Py<PyAny>) -> Self {
        RequestCounts {
            in_flight: AtomicU32::new(0),
            done: AtomicU64::new(0),
            due: AtomicU64::new(due),
            on_due,
        }
    }

    /// Requests whose app call has started and not ended.
    #[getter]
    fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    /// An exchange counted without an app call of its own here (a
    /// WebSocket session, whose class counts it at its end).
    fn count(&self, py: Python<'_>) {
        self.served(py);
    }

    /// The requests served since the last take; `due` counts down by as many.
    fn take_done(&self) -> u64 {
        let done = self.done.swap(0, Relaxed);
        let due = self.due.load(Relaxed);
        self.due.store(due.saturating_sub(done), Relaxed);
        done
    }
}
