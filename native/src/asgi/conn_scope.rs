//! What a connection's ASGI scopes share, made at its first request and kept
//! on the connection (`ConnInfo::adapter_state`) for the rest.
//!
//! Building each scope from nothing cost the engine about 5k instructions
//! a request (of 42k on a small GET): a new dict grown twice on the way to
//! fourteen keys, `client`
//! and `server` parsed from text into new tuples, the path, raw_path and
//! header pairs made again though a keep-alive client sends the same ones.
//! Now a request copies the connection's base (one allocation of the right
//! size, its keys already there, so filling replaces values) and takes its
//! values from the last request's where the bytes are the same (py/repeats.rs).
//! The asgi worker's connection does the same (`ConnectionInfo.http_base`).

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::bridge::Bridge;
use crate::py::asgi_scope::ScopeRepeats;
use crate::server::ConnInfo;

pub struct ConnScope {
    /// The Python objects; `None` only once dropped.
    held: Option<Held>,
    /// Whether `http_base`'s extensions offer early hints: each request
    /// says whether its exchange can write them.
    pub hints: bool,
    /// Where the objects are dropped when the connection ends on a runtime
    /// thread (`Bridge::drop_on_loop`).
    bridge: Arc<Bridge>,
}

struct Held {
    /// An http scope of this connection with the request's own keys as
    /// None: what each request's scope is a copy of.
    http_base: Py<PyDict>,
    /// The last request's values; every request of the connection is built
    /// on the loop's thread, with the GIL, so the lock is never contended.
    repeats: Mutex<ScopeRepeats>,
}

impl ConnScope {
    pub fn new(http_base: Bound<'_, PyDict>, hints: bool, bridge: Arc<Bridge>) -> Self {
        ConnScope {
            held: Some(Held {
                http_base: http_base.unbind(),
                repeats: Mutex::new(ScopeRepeats::kept()),
            }),
            hints,
            bridge,
        }
    }

    fn held(&self) -> &Held {
        self.held
            .as_ref()
            .expect("a ConnScope is used only before it is dropped")
    }

    pub fn http_base<'py>(&self, py: Python<'py>) -> &Bound<'py, PyDict> {
        self.held().http_base.bind(py)
    }

    pub fn repeats(&self) -> MutexGuard<'_, ScopeRepeats> {
        self.held()
            .repeats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The connection's, made by `make` at its first request.
    pub fn of(conn: &ConnInfo, make: impl FnOnce() -> PyResult<ConnScope>) -> PyResult<&ConnScope> {
        let state = match conn.adapter_state.get() {
            Some(state) => state,
            // Only the loop's thread gets here, so no one else sets it.
            None => {
                let made: Box<dyn std::any::Any + Send + Sync> = Box::new(make()?);
                conn.adapter_state.get_or_init(|| made)
            }
        };
        state.downcast_ref::<ConnScope>().ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err(
                "the connection holds another adapter's state",
            )
        })
    }
}

impl Drop for ConnScope {
    fn drop(&mut self) {
        // SAFETY: PyGILState_Check only reads the calling thread's state.
        let attached = unsafe { pyo3::ffi::PyGILState_Check() } == 1;
        if let (Some(held), false) = (self.held.take(), attached) {
            self.bridge.drop_on_loop(held);
        }
    }
}
