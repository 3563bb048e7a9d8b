//! ASGI apps on the native server (`-k native --interface asgi`): requests
//! come through the RSGI bridge (the app runs on the worker's asyncio loop),
//! the scope is built by `py::asgi_scope` (the asgi worker's builder too), and
//! `receive`/`send` are methods of one native object per request whose
//! results are awaitables completed without an asyncio Future when the
//! answer is known at once (`send` of a buffered message, `receive` of an
//! empty body). The asgi worker's requests run through the same `AppRun`
//! (`worker/`, with the worker's connection and request cycle).

mod access;
mod app;
mod conn_scope;
mod cycle;
mod messages;
mod worker;

pub use app::AsgiApp;
pub use cycle::HttpCycle;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<app::AsgiApp>()?;
    m.add_class::<cycle::HttpCycle>()?;
    m.add_function(wrap_pyfunction!(access::asgi_access_environ, m)?)?;
    worker::register(m)?;
    Ok(())
}
