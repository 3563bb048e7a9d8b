//! The Python boundary of the native server, the same for every interface
//! (RSGI, ASGI, WSGI over HTTP/2): the queue that carries requests and
//! completions from the tokio threads to the thread running the asyncio
//! loop, the context every request's Python objects share, the Task that
//! runs an app's coroutine, and the proxy-header rules (the awaitables known
//! at once are `py::awaitable`'s, which the asgi worker's cycle uses too).
//! The adapters (`rsgi`, `asgi`, `wsgi`) build on it; it knows none of them.
//!
//! Rule of the bridge: tokio threads never take the GIL. They push Rust
//! values into one queue and wake the loop through a socket pair only when
//! the queue turns non-empty; the loop drains the queue in one GIL-holding
//! call. Python reaches tokio through channels and `Handle::spawn`, which
//! need no GIL either.

pub mod app_run;
pub mod forwarded;
pub mod hyper_head;
pub mod loop_ctx;
pub mod queue;

pub use crate::py::awaitable::done;
pub use app_run::{AppCalls, AppRun, Finish, ProtocolObject};
pub use forwarded::{Forwarded, Proxied};
pub use hyper_head::{HyperHead, RequestView};
pub use loop_ctx::{complete, LoopCtx};
pub use queue::{Bridge, BridgeDispatch, Event, Outcome};

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AppCalls>()?;
    m.add_class::<AppRun>()?;
    m.add_class::<Finish>()?;
    // asyncio's Task takes what asyncio.iscoroutine() accepts.
    m.py()
        .import("collections.abc")?
        .getattr("Coroutine")?
        .call_method1("register", (m.py().get_type::<AppRun>(),))?;
    Ok(())
}
