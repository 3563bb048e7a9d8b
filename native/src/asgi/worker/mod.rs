//! The asgi worker's native half (`-k asgi`, on the worker's own asyncio
//! loop): per connection `AsgiHttpConnection` (`connection.rs`, the base of
//! `supervise/http/asgi_http.py`'s `HttpProtocol`), per request `AsgiCycle`
//! (`cycle.rs`, the base of `asgi_cycle.py`'s `RequestCycle`), and the
//! request's Task on the engine's `AppRun` (`run.rs`), and the whole
//! responses that wait for the end of the loop's turn (`turn_writes.rs`).
//! Python subclasses keep what is rare or waits.

mod connection;
mod cycle;
mod run;
mod turn_writes;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<connection::AsgiHttpShared>()?;
    m.add_class::<connection::AsgiHttpConnection>()?;
    m.add_class::<cycle::AsgiCycle>()?;
    m.add_class::<cycle::ResponseState>()?;
    m.add_function(wrap_pyfunction!(run::run_asgi_cycle, m)?)?;
    Ok(())
}
