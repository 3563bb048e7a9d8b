//! RSGI (Granian's interface) over the native server: the Python objects an
//! RSGI app sees (scope, headers, the HTTP and WebSocket protocol objects,
//! their stream transports) and the exceptions it may catch. Requests reach
//! them through the bridge (`crate::bridge`).

mod access;
mod errors;
mod headers;
mod protocol;
mod scope;
mod transport;
mod ws_protocol;
mod ws_transport;

pub use protocol::HTTPProtocol;
pub use scope::Scope;
pub use ws_protocol::WebsocketProtocol;

use pyo3::prelude::*;

use crate::bridge::{Finish, ProtocolObject};
use crate::py::access_format::AccessLog;

/// An RSGI protocol object as `AppRun` runs it: the app is called with the
/// scope and the object itself, which answers what the app left unanswered.
macro_rules! protocol_object {
    ($class:ty) => {
        impl ProtocolObject for Py<$class> {
            fn call_app(
                &self,
                py: Python<'_>,
                app: &Py<PyAny>,
                scope: Py<PyAny>,
            ) -> PyResult<Py<PyAny>> {
                app.call1(py, (scope, self.clone_ref(py)))
            }

            fn finish(&self, _py: Python<'_>, error: bool) -> Finish {
                self.get().finish(error)
            }

            fn object(&self, py: Python<'_>) -> Py<PyAny> {
                self.clone_ref(py).into_any()
            }

            fn log_access(
                &self,
                py: Python<'_>,
                log: &AccessLog,
                scope: &Bound<'_, PyAny>,
                seconds: f64,
            ) {
                let resp = access::AccessResponse::access_response(self.get(), py);
                access::log_exchange(py, log, scope, resp, seconds)
            }
        }
    };
}

protocol_object!(HTTPProtocol);
protocol_object!(WebsocketProtocol);

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
    m.add_class::<scope::Scope>()?;
    m.add_function(wrap_pyfunction!(access::rsgi_access_environ, m)?)?;
    m.add_class::<headers::Headers>()?;
    m.add_class::<protocol::HTTPProtocol>()?;
    m.add_class::<transport::HTTPStreamTransport>()?;
    m.add_class::<ws_protocol::WebsocketProtocol>()?;
    m.add_class::<ws_transport::WebsocketTransport>()?;
    m.add_class::<ws_transport::WebsocketMessage>()?;
    Ok(())
}
