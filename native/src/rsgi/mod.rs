//! RSGI (Granian's interface) over the native server: the Python objects an
//! app sees (scope, headers, protocol, stream transport), and the bridge that
//! carries requests and completions from the tokio threads to the thread
//! running the asyncio loop.
//!
//! Rule of the bridge: tokio threads never take the GIL. They push Rust
//! values into one queue and wake the loop through a socket pair only when
//! the queue turns non-empty; the loop drains the queue in one GIL-holding
//! call. Python reaches tokio through channels and `Handle::spawn`, which
//! need no GIL either.

pub(crate) mod app_run;
pub(crate) mod awaitable;
pub(crate) mod body;
pub(crate) mod bridge;
mod errors;
pub(crate) mod forwarded;
mod headers;
mod protocol;
pub mod scope;
pub(crate) mod server;
mod tls;
mod transport;
mod ws_protocol;
mod ws_transport;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add(
        "RSGIProtocolError",
        py.get_type::<errors::RSGIProtocolError>(),
    )?;
    m.add(
        "RSGIProtocolClosed",
        py.get_type::<errors::RSGIProtocolClosed>(),
    )?;
    m.add_class::<server::NativeServer>()?;
    m.add_class::<app_run::AppCalls>()?;
    m.add_class::<app_run::AppRun>()?;
    // asyncio's Task takes what asyncio.iscoroutine() accepts.
    py.import("collections.abc")?
        .getattr("Coroutine")?
        .call_method1("register", (py.get_type::<app_run::AppRun>(),))?;
    m.add_class::<tls::RsgiTls>()?;
    m.add_class::<scope::Scope>()?;
    m.add_class::<headers::Headers>()?;
    m.add_class::<protocol::HTTPProtocol>()?;
    m.add_class::<transport::HTTPStreamTransport>()?;
    m.add_class::<ws_protocol::WebsocketProtocol>()?;
    m.add_class::<ws_transport::WebsocketTransport>()?;
    m.add_class::<ws_transport::WebsocketMessage>()?;
    Ok(())
}
