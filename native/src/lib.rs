//! `supervise._native`: the parts of the server that run for every request.
//! `h1` is plain Rust; `py` exposes it to the Python workers.

mod asgi;
pub mod h1;
pub mod proxy;
pub(crate) mod py;
mod relay;
pub(crate) mod rsgi;
pub mod server;
mod wsgi;
mod x509_name;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    py::register(m)?;
    rsgi::register(m)?;
    asgi::register(m)?;
    wsgi::register(m)
}
