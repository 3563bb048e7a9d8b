//! The asgi worker's request (`cycle::AsgiCycle`, on the worker's
//! own asyncio connection) as `AppRun` runs it: the same stepper, outcome
//! and log lines as the engine's ASGI requests, where a Python coroutine
//! around the app did this before (one more frame at every step, and the
//! counting and outcome checks as bytecodes).
//!
//! What the app left unanswered is answered as the worker always did: a 500
//! when no head went out, otherwise a cut connection; and the connection
//! closes after an app that raised, even with its response complete.

use pyo3::intern;
use pyo3::prelude::*;

use super::cycle::{AsgiCycle, ResponseState};
use crate::bridge::{AppCalls, AppRun, Finish, ProtocolObject};

struct WorkerCycle {
    cycle: Py<AsgiCycle>,
    /// Called instead of the worker's app (a static file's answer).
    app: Option<Py<PyAny>>,
}

impl ProtocolObject for WorkerCycle {
    fn call_app(&self, py: Python<'_>, app: &Py<PyAny>, scope: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let cycle = self.cycle.bind(py);
        // Before anything can fail: `finish` counts the end whatever happens.
        cycle.borrow().counts().get().started();
        let receive = cycle.getattr(intern!(py, "receive"))?;
        let send = cycle.getattr(intern!(py, "send"))?;
        self.app
            .as_ref()
            .unwrap_or(app)
            .call1(py, (scope, receive, send))
    }

    fn finish(&self, py: Python<'_>, error: bool) -> Finish {
        let cycle = self.cycle.bind(py);
        let (state, gone) = {
            let me = cycle.borrow();
            me.counts().get().ended(py);
            (me.response_state(), me.is_gone())
        };
        // Gone comes first: a request whose body the server refused is
        // answered and marked gone, and the app's read then raised.
        let finish = match state {
            _ if gone => Finish::ClientGone,
            ResponseState::Complete => Finish::Answered,
            ResponseState::NotStarted | ResponseState::Started if error => {
                Finish::ErrorBeforeResponse
            }
            ResponseState::NotStarted => Finish::NoResponse,
            _ if error => Finish::CutOff,
            _ => Finish::Incomplete,
        };
        if error || !matches!(finish, Finish::Answered | Finish::ClientGone) {
            if let Err(err) = cycle.call_method0(intern!(py, "_failed")) {
                err.write_unraisable(py, Some(cycle.as_any()));
            }
        }
        finish
    }

    fn object(&self, py: Python<'_>) -> Py<PyAny> {
        self.cycle.clone_ref(py).into_any()
    }
}

/// What the Task of one asgi-worker request runs: `calls.app` (or `app`)
/// with the cycle's scope, `receive` and `send`.
#[pyfunction]
#[pyo3(signature = (calls, cycle, app = None))]
pub(super) fn run_asgi_cycle(
    py: Python<'_>,
    calls: Py<AppCalls>,
    cycle: Py<AsgiCycle>,
    app: Option<Py<PyAny>>,
) -> PyResult<AppRun> {
    let scope = cycle.borrow(py).scope().clone_ref(py);
    Ok(AppRun::new(
        calls,
        scope,
        Box::new(WorkerCycle { cycle, app }),
    ))
}
