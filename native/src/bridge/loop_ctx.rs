//! What the Python objects of every request share: the bridge back to the
//! loop, and the loop's `create_future`. Work started in tokio for a Python
//! awaitable ends as an `Outcome` pushed on the bridge; `complete` sets it
//! on the awaiting future, on the loop's thread.

use std::sync::Arc;

use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::queue::{Bridge, Event, Outcome};
use crate::py::awaitable::Ready;

pub struct LoopCtx {
    pub bridge: Arc<Bridge>,
    create_future: Py<PyAny>,
}

impl LoopCtx {
    pub fn new(bridge: Arc<Bridge>, create_future: Py<PyAny>) -> Self {
        LoopCtx {
            bridge,
            create_future,
        }
    }

    pub fn future(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.create_future.call0(py)
    }

    pub fn ready(&self, py: Python<'_>, value: Py<PyAny>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, Ready::new(value))?.into_any())
    }

    /// A loop future completed with what `work` gives once it ran on `runtime`.
    pub fn spawn<F>(
        &self,
        py: Python<'_>,
        runtime: &tokio::runtime::Handle,
        work: F,
    ) -> PyResult<Py<PyAny>>
    where
        F: std::future::Future<Output = Outcome> + Send + 'static,
    {
        let fut = self.future(py)?;
        let waiter = fut.clone_ref(py);
        let bridge = self.bridge.clone();
        runtime.spawn(async move {
            let outcome = work.await;
            bridge.push(Event::Ready(waiter, outcome));
        });
        Ok(fut)
    }

    /// Resolves (with None) once `tracker`'s exchange is over; a `Ready` at
    /// once when it is.
    pub fn when_gone(
        &self,
        py: Python<'_>,
        tracker: &crate::server::Tracker,
    ) -> PyResult<Py<PyAny>> {
        if tracker.is_gone() {
            return self.ready(py, py.None());
        }
        let fut = self.future(py)?;
        let waiter = fut.clone_ref(py);
        let bridge = self.bridge.clone();
        tracker.on_gone(Box::new(move || {
            bridge.push(Event::Ready(waiter, Outcome::None))
        }));
        Ok(fut)
    }
}

/// Sets `outcome` on the future that awaits it.
pub fn complete(py: Python<'_>, fut: Py<PyAny>, outcome: Outcome) {
    let fut = fut.bind(py);
    let set_result = intern!(py, "set_result");
    let set_exception = intern!(py, "set_exception");
    let done = match outcome {
        Outcome::Bytes(b) => fut.call_method1(set_result, (PyBytes::new(py, &b),)),
        Outcome::None => fut.call_method1(set_result, (py.None(),)),
        Outcome::Made(make, body, flag) => {
            make(py, &body, flag).and_then(|value| fut.call_method1(set_result, (value,)))
        }
        Outcome::End => fut.call_method1(
            set_exception,
            (PyStopAsyncIteration::new_err(()).into_value(py),),
        ),
        Outcome::Raise(make, msg) => {
            fut.call_method1(set_exception, (make(py, msg).into_value(py),))
        }
    };
    // A future the app cancelled (a timeout) refuses its result: nothing to do.
    drop(done);
}
