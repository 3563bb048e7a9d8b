//! `Relay` for Python: the gthread worker's leader/follower turns.

use std::time::Duration;

use pyo3::prelude::*;

use crate::relay::{self, Turn};

#[pyclass(module = "supervise._native", name = "Relay", frozen)]
pub struct Relay {
    inner: relay::Relay,
}

#[pymethods]
impl Relay {
    #[new]
    #[pyo3(signature = (*, switch_after))]
    fn new(switch_after: f64) -> PyResult<Self> {
        let switch_after = Duration::try_from_secs_f64(switch_after)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        Ok(Relay {
            inner: relay::Relay::new(switch_after),
        })
    }

    /// Blocks, without the GIL, until the calling thread leads (True) or the
    /// relay stops (False).
    fn lead(&self, py: Python<'_>) -> bool {
        let mut back = true;
        loop {
            // Back from `detach`, this thread holds the GIL again: the leader has
            // released it (blocked) or been made to yield.
            match py.detach(|| self.inner.wait_turn(back)) {
                Turn::Lead => return true,
                Turn::Stopped => return false,
                Turn::Reach(event) => {
                    if self.inner.depose(event) {
                        return true;
                    }
                    back = false;
                }
            }
        }
    }

    /// The leader begins serving an event.
    fn serve(&self) {
        self.inner.serve()
    }

    /// The leader is about to block waiting for readiness.
    fn idle(&self) {
        self.inner.idle()
    }

    /// The leader's event is done: True if it still leads.
    fn keep_lead(&self) -> bool {
        self.inner.keep_lead()
    }

    /// A waiting thread would take the lead from a slow request.
    fn has_watcher(&self) -> bool {
        self.inner.has_watcher()
    }

    fn stop(&self) {
        self.inner.stop()
    }
}
