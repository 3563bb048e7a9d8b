//! `AppRun`: what the Task of one ASGI or RSGI request (or RSGI WebSocket
//! session) runs, whichever adapter's protocol object (`ProtocolObject`) it holds. It is the app's own coroutine, stepped from Rust, plus
//! what the engine does when the app ends: the 500, refused handshake or cut
//! connection of an unanswered exchange (the protocol object's `finish`),
//! and the log lines and access record (the worker's `AppCalls`, called
//! only when there is something to log or the access log or metrics are on).
//!
//! A Python wrapper coroutine did this before: one more frame per request,
//! resumed at every step of the app. Driven through `tp_iternext` (what
//! `PyIter_Send` calls for `send(None)`, as asyncio's Task does), an ended
//! app costs no StopIteration either. Pinned, c=128: GET 4 B 92.6k -> 98.3k
//! req/s (1.06x), POST echo 10 KiB 58.3k -> 61.5k (1.05x).

use std::ptr::null_mut;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use pyo3::exceptions::{
    PyAttributeError, PyException, PyGeneratorExit, PyRuntimeError, PyStopIteration,
};
use pyo3::prelude::*;
use pyo3::{ffi, intern};

use crate::py::access_format::AccessLog;

/// The worker's side, the same for every request of one server (RSGI:
/// `NativeServer(rsgi=)`; ASGI: inside `AsgiApp`).
#[pyclass(module = "supervise._native", frozen)]
pub struct AppCalls {
    /// The app: ASGI's `app(scope, receive, send)`, RSGI's `__rsgi__` or
    /// `__call__(scope, protocol)`.
    pub app: Py<PyAny>,
    /// `log_outcome(finish, scope, exc)`: the log line of an exchange the
    /// app raised in (`exc`, the Task's cancellation too) or left unanswered
    /// (`finish`, a `Finish`).
    pub log_outcome: Py<PyAny>,
    /// `done(scope, protocol, seconds)` after every exchange: the metrics,
    /// and the access log when `access` does not write it; None when both
    /// are off, and then nothing is timed.
    pub done: Option<Py<PyAny>>,
    /// The access log, when its lines are made natively: each exchange's
    /// line is written from its head (`ProtocolObject::log_access`).
    pub access: Option<Py<AccessLog>>,
}

#[pymethods]
impl AppCalls {
    #[new]
    #[pyo3(signature = (*, app, log_outcome, done, access = None))]
    pub fn new(
        app: Py<PyAny>,
        log_outcome: Py<PyAny>,
        done: Option<Py<PyAny>>,
        access: Option<Py<AccessLog>>,
    ) -> Self {
        AppCalls {
            app,
            log_outcome,
            done,
            access,
        }
    }
}

impl AppCalls {
    /// Whether an exchange is timed and its response noted: something reads
    /// them when it ends.
    pub fn measured(&self) -> bool {
        self.done.is_some() || self.access.is_some()
    }
}

/// How an exchange ended, as its protocol object's `finish` saw it: what
/// the worker's `log_outcome` (`http/rsgi_call.py`, `http/asgi_engine.py`)
/// logs. Python reads it by name (`_native.Finish.CUT_OFF`).
#[pyclass(
    module = "supervise._native",
    eq,
    frozen,
    rename_all = "SCREAMING_SNAKE_CASE"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// A complete response (or a WebSocket session closed by the app).
    Answered,
    /// The app returned without starting a response: the server sent 500.
    NoResponse,
    /// The app raised before the response started: the server sent 500.
    ErrorBeforeResponse,
    /// The app raised with the response under way: the connection was cut.
    CutOff,
    /// ASGI: the app returned with its response unfinished.
    Incomplete,
    /// ASGI: the client went away before the response was complete.
    ClientGone,
    /// RSGI: the server answered itself (a request body it refused with 400
    /// or 413) and the app's read of it raised: not the app's error.
    ServerAnswered,
}

/// The protocol object of an exchange: what the app is called with, and
/// what ends the exchange when the app is over. Each adapter has its own.
pub trait ProtocolObject: Send + Sync {
    /// The app's coroutine for this exchange.
    fn call_app(&self, py: Python<'_>, app: &Py<PyAny>, scope: Py<PyAny>) -> PyResult<Py<PyAny>>;
    /// Answers what the app left unanswered (`error`: it raised).
    fn finish(&self, py: Python<'_>, error: bool) -> Finish;
    /// The object the worker's `done` callable is given.
    fn object(&self, py: Python<'_>) -> Py<PyAny>;
    /// Writes the exchange's access line (`scope`: the one the app had).
    /// None by default: the asgi worker's cycle logs its request itself, when
    /// its response is complete, and its `AppCalls` hold no `AccessLog`.
    fn log_access(
        &self,
        _py: Python<'_>,
        _log: &AccessLog,
        _scope: &Bound<'_, PyAny>,
        _seconds: f64,
    ) {
    }
}

/// Where the app's coroutine is.
enum Stage {
    /// The app is called at the first step, inside the Task's context
    /// (a plain `__call__` that sets a contextvar sets it for this request).
    Unstarted,
    Running(Py<PyAny>),
    Over,
}

/// What one step of the app's coroutine gave.
enum Step {
    Yielded(Py<PyAny>),
    Returned,
    Raised(PyErr),
}

/// Frozen, with the stage behind a lock held only between calls into
/// Python: the app may look at its own Task's coroutine while it runs
/// (`repr(current_task())` reads `cr_running`).
#[pyclass(module = "supervise._native", frozen)]
pub struct AppRun {
    calls: Py<AppCalls>,
    scope: Py<PyAny>,
    served: Box<dyn ProtocolObject>,
    stage: Mutex<Stage>,
    /// Set at the first step when the access log or metrics are on.
    started: OnceLock<Instant>,
}

fn lock(stage: &Mutex<Stage>) -> std::sync::MutexGuard<'_, Stage> {
    stage.lock().unwrap_or_else(|e| e.into_inner())
}

impl AppRun {
    pub fn new(calls: Py<AppCalls>, scope: Py<PyAny>, served: Box<dyn ProtocolObject>) -> AppRun {
        AppRun {
            calls,
            scope,
            served,
            stage: Mutex::new(Stage::Unstarted),
            started: OnceLock::new(),
        }
    }

    /// Sends `value` in (or throws `exc`); Some(what to yield to the Task),
    /// None once the app is over and the engine has done its part.
    fn step(
        &self,
        py: Python<'_>,
        value: Option<&Bound<'_, PyAny>>,
        exc: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let coro = match self.current(py) {
            Stage::Running(coro) => coro,
            Stage::Unstarted => match self.call_app(py) {
                Ok(coro) => coro,
                Err(err) => return self.ended(py, Err(err)),
            },
            Stage::Over => {
                return Err(PyRuntimeError::new_err(
                    "cannot reuse already awaited coroutine",
                ))
            }
        };
        let coro = coro.bind(py);
        let step = match exc {
            Some(exc) => throw_into(coro, exc),
            None => send_into(coro, value.unwrap_or(&py.None().into_bound(py))),
        };
        match step {
            Step::Yielded(yielded) => Ok(Some(yielded)),
            Step::Returned => self.ended(py, Ok(())),
            Step::Raised(err) => self.ended(py, Err(err)),
        }
    }

    /// The stage now, its coroutine a new reference: the lock is not held
    /// while the app runs.
    fn current(&self, py: Python<'_>) -> Stage {
        match &*lock(&self.stage) {
            Stage::Running(coro) => Stage::Running(coro.clone_ref(py)),
            Stage::Unstarted => Stage::Unstarted,
            Stage::Over => Stage::Over,
        }
    }

    fn call_app(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let calls = self.calls.get();
        if calls.measured() {
            let _ = self.started.set(Instant::now());
        }
        *lock(&self.stage) = Stage::Over;
        let coro = self
            .served
            .call_app(py, &calls.app, self.scope.clone_ref(py))?;
        *lock(&self.stage) = Stage::Running(coro.clone_ref(py));
        Ok(coro)
    }

    /// The app returned (`Ok`) or raised: the engine answers what it left
    /// unanswered, the worker logs it. An `Exception` ends here; anything
    /// else (the Task's cancellation at exit) goes on up once logged.
    fn ended(&self, py: Python<'_>, outcome: PyResult<()>) -> PyResult<Option<Py<PyAny>>> {
        let over = std::mem::replace(&mut *lock(&self.stage), Stage::Over);
        drop(over);
        let finish = self.served.finish(py, outcome.is_err());
        let scope = self.scope.bind(py);
        let calls = self.calls.get();
        let log_outcome = calls.log_outcome.bind(py);
        let result = match outcome {
            Ok(()) => {
                if finish != Finish::Answered {
                    report(log_outcome, (finish, scope, py.None()));
                }
                Ok(None)
            }
            Err(err) => {
                let exc = err.into_value(py).into_bound(py);
                report(log_outcome, (finish, scope, &exc));
                if exc.is_instance_of::<PyException>() {
                    Ok(None)
                } else {
                    Err(PyErr::from_value(exc.into_any()))
                }
            }
        };
        if let Some(started) = self.started.get() {
            let elapsed = started.elapsed().as_secs_f64();
            if let Some(access) = &calls.access {
                self.served.log_access(py, access.get(), scope, elapsed);
            }
            if let Some(done) = &calls.done {
                report(done.bind(py), (scope, self.served.object(py), elapsed));
            }
        }
        result
    }
}

/// Calls a logging callable; its own failure is reported, not raised into
/// the Task (the request is over either way).
fn report<'py, A>(callable: &Bound<'py, PyAny>, args: A)
where
    A: pyo3::call::PyCallArgs<'py>,
{
    if let Err(err) = callable.call1(args) {
        err.write_unraisable(callable.py(), Some(callable));
    }
}

fn send_into(coro: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> Step {
    let py = coro.py();
    let mut result: *mut ffi::PyObject = null_mut();
    // SAFETY: both are live objects; `result` receives a new reference (or
    // NULL on PYGEN_ERROR, with the error set).
    let status = unsafe { ffi::PyIter_Send(coro.as_ptr(), value.as_ptr(), &mut result) };
    match status {
        ffi::PySendResult::PYGEN_NEXT => {
            // SAFETY: a new reference, per PyIter_Send.
            Step::Yielded(unsafe { Py::from_owned_ptr(py, result) })
        }
        ffi::PySendResult::PYGEN_RETURN => {
            // SAFETY: the return value, a new reference; the app's is ignored.
            drop(unsafe { Py::<PyAny>::from_owned_ptr(py, result) });
            Step::Returned
        }
        ffi::PySendResult::PYGEN_ERROR => Step::Raised(PyErr::fetch(py)),
    }
}

fn throw_into(coro: &Bound<'_, PyAny>, exc: &Bound<'_, PyAny>) -> Step {
    let py = coro.py();
    match coro.call_method1(intern!(py, "throw"), (exc,)) {
        Ok(yielded) => Step::Yielded(yielded.unbind()),
        Err(err) if err.is_instance_of::<PyStopIteration>(py) => Step::Returned,
        Err(err) => Step::Raised(err),
    }
}

/// What a method (not `tp_iternext`) returns when the app is over.
fn or_stop(stepped: PyResult<Option<Py<PyAny>>>) -> PyResult<Py<PyAny>> {
    stepped?.ok_or_else(|| PyStopIteration::new_err(()))
}

#[pymethods]
impl AppRun {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `send(None)`: a NULL return without an exception is the app's end.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.step(py, None, None)
    }

    fn send(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        or_stop(self.step(py, Some(value), None))
    }

    /// `throw(exc)`: how the Task cancels the app. The old three-argument
    /// form is accepted as coroutines accept it.
    #[pyo3(signature = (exc, value = None, _traceback = None))]
    fn throw(
        &self,
        py: Python<'_>,
        exc: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let exc = match value {
            Some(value) if !value.is_none() => exc.call1((value,))?,
            _ => exc.clone(),
        };
        or_stop(self.step(py, None, Some(&exc)))
    }

    /// Closes the app's coroutine (GeneratorExit runs its `finally`); the
    /// request is then cut as after any cancellation.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let stage = std::mem::replace(&mut *lock(&self.stage), Stage::Over);
        let Stage::Running(coro) = stage else {
            return Ok(());
        };
        let closed = coro.call_method0(py, intern!(py, "close"));
        let _ = self.ended(py, Err(PyGeneratorExit::new_err(())));
        closed.map(drop)
    }

    /// The app coroutine's own attributes (`cr_frame`, `__qualname__`) for
    /// asyncio's task repr and stack; the `cr_` ones are None once over.
    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        match self.current(py) {
            Stage::Running(coro) => coro.getattr(py, name),
            _ if name.starts_with("cr_") => Ok(py.None()),
            _ => Err(PyAttributeError::new_err(name.to_owned())),
        }
    }
}
