//! WSGI on the native server (`-k native`, the engine): the app is called on
//! the runtime thread that did the connection's I/O, with the GIL taken there
//! (the bjoern model: no hand-off to another thread, the environ built in
//! Rust). The request body is read whole before the call (`dispatch.rs`),
//! so `wsgi.input` never waits on the network while the app holds the thread;
//! a large body waits in a temporary file (`spool.rs`).
//!
//! The rules of the interface are the Python workers' own: the environ keys
//! come from `py::environ` (one builder for both), the response fields go
//! through `h1::check_field`.

mod app;
mod clock;
mod direct_http1;
mod direct_response;
mod dispatch;
mod input;
mod spool;
mod start;
mod stream;

pub use app::WsgiApp;
pub use clock::AppClock;
pub use dispatch::WsgiDispatch;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<app::WsgiApp>()?;
    m.add_class::<input::WsgiInput>()?;
    m.add_class::<start::StartResponse>()?;
    Ok(())
}
