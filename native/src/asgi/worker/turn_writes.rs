//! `TurnWrites`: the asgi worker's whole responses, written together at the
//! end of the loop's turn instead of one app call apart.
//!
//! Each write wakes its reader. A client on the same host (a load balancer,
//! a proxy, a benchmark) written to one app call after the last is asleep
//! again by then, and waking it across cores is billed to the writer:
//! about 1 µs of this worker's core per response at c=128 on get-4b. The
//! requests one poll brings run their apps back to back; their responses
//! wait here and leave in one burst, which wakes the client once. The same
//! wait is in the WSGI engine (`after_this_turn`), gthread and gevent
//! (docs/performance.md, "One poll's responses leave together").
//!
//! Only the common response waits: a body in one message, joined to its
//! head, that ends the response. The connection's next step (the next
//! pipelined request, or its close) waits with it, so nothing else can be
//! written to that connection before it: the response's bytes and the
//! connection's `response_complete` are one entry, run in order. The
//! cycle itself is complete at once (the app's `send` returns, `receive`
//! says the exchange is over), as when the write went out at once.
//!
//! A lone connection's response (no other connection open, nothing
//! waiting) goes at once: there is nothing to gather, and the wait would
//! cost a turn. Requests in flight would not tell: on Python 3.11 a
//! request's Task runs its app to its end before the next one starts, so
//! an app that answers at once is always alone in flight.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::connection::AsgiHttpConnection;
use super::cycle::AsgiCycle;

/// One response waiting for the turn's end.
struct Waiting {
    cycle: Py<AsgiCycle>,
    proto: Py<AsgiHttpConnection>,
    transport: Py<PyAny>,
    data: Py<PyBytes>,
    keep_alive: bool,
}

/// The responses of one worker's loop waiting for the end of its turn; it
/// is itself the callback the loop runs then (`loop.call_soon(self)`).
#[pyclass(module = "supervise._native")]
pub struct TurnWrites {
    /// The loop's `call_soon`.
    call_soon: Py<PyAny>,
    waiting: Vec<Waiting>,
}

impl TurnWrites {
    pub(super) fn new(event_loop: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(TurnWrites {
            call_soon: event_loop
                .getattr(intern!(event_loop.py(), "call_soon"))?
                .unbind(),
            waiting: Vec::new(),
        })
    }

    /// Whether a response should wait: other connections are open beside
    /// its own, or responses already wait.
    pub(super) fn worth_waiting(slf: &Bound<'_, Self>, open_connections: usize) -> bool {
        open_connections > 1 || !slf.borrow().waiting.is_empty()
    }

    /// Keeps `data` for the turn's end, then the connection's next step.
    pub(super) fn push(
        slf: &Bound<'_, Self>,
        cycle: &Bound<'_, AsgiCycle>,
        proto: Py<AsgiHttpConnection>,
        transport: Py<PyAny>,
        data: Bound<'_, PyBytes>,
        keep_alive: bool,
    ) -> PyResult<()> {
        let first = {
            let mut me = slf.borrow_mut();
            me.waiting.push(Waiting {
                cycle: cycle.clone().unbind(),
                proto,
                transport,
                data: data.unbind(),
                keep_alive,
            });
            me.waiting.len() == 1
        };
        if first {
            let call_soon = slf.borrow().call_soon.clone_ref(slf.py());
            if let Err(err) = call_soon.call1(slf.py(), (slf,)) {
                // A closed loop: what is kept could never leave, so it goes now.
                err.write_unraisable(slf.py(), Some(slf.as_any()));
                Self::flush(slf);
            }
        }
        Ok(())
    }

    /// Writes what waits, in order, each followed by its connection's next
    /// step; one connection's failure does not hold back the others.
    fn flush(slf: &Bound<'_, Self>) {
        let py = slf.py();
        let waiting = std::mem::take(&mut slf.borrow_mut().waiting);
        for w in waiting {
            if let Err(err) = Self::write_one(py, &w) {
                err.write_unraisable(py, Some(w.cycle.bind(py).as_any()));
                let _ = AsgiHttpConnection::close(w.proto.bind(py));
            }
        }
    }

    fn write_one(py: Python<'_>, w: &Waiting) -> PyResult<()> {
        let cycle = w.cycle.bind(py);
        let transport = w.transport.bind(py);
        // A client gone since: nothing to write (its transport is closing).
        if !cycle.borrow().is_gone() {
            transport.call_method1(intern!(py, "write"), (w.data.bind(py),))?;
        }
        AsgiHttpConnection::response_complete(w.proto.bind(py), cycle, w.keep_alive)
    }
}

#[pymethods]
impl TurnWrites {
    fn __call__(slf: &Bound<'_, Self>) {
        Self::flush(slf);
    }

    /// How many responses wait (tests and the sweep's view).
    fn __len__(&self) -> usize {
        self.waiting.len()
    }
}
