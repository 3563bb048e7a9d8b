//! The access line of an RSGI exchange, read from the head its scope holds:
//! written natively (`AccessLog`) for text lines, or the environ the other
//! formats read (`rsgi_access_environ`), the one `environ::fill` gives the
//! WSGI classes.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::protocol::HTTPProtocol;
use super::scope::Scope;
use super::ws_protocol::WebsocketProtocol;
use crate::bridge::RequestView;
use crate::py::access_format::{head_environ, remote_addr, AccessLog, KnownResponse};

/// What a protocol object says of the response it sent.
pub(super) trait AccessResponse {
    fn access_response<'py>(&self, py: Python<'py>) -> KnownResponse<'py>;
}

impl AccessResponse for HTTPProtocol {
    fn access_response<'py>(&self, py: Python<'py>) -> KnownResponse<'py> {
        let status = self._status();
        KnownResponse {
            status,
            sent: (status != 0).then(|| self._sent()),
            headers: self._headers(py).map(|h| h.into_bound(py)),
        }
    }
}

impl AccessResponse for WebsocketProtocol {
    /// A session's 101 has no body.
    fn access_response<'py>(&self, _py: Python<'py>) -> KnownResponse<'py> {
        let status = self._status();
        KnownResponse {
            status,
            sent: (status != 0).then_some(0),
            headers: None,
        }
    }
}

/// Writes the line of the exchange `scope` (an RSGI `Scope`) belongs to.
pub(super) fn log_exchange(
    py: Python<'_>,
    log: &AccessLog,
    scope: &Bound<'_, PyAny>,
    resp: KnownResponse<'_>,
    seconds: f64,
) {
    let Ok(scope) = scope.cast::<Scope>() else {
        return;
    };
    let exchange = scope.get();
    let head = RequestView::of(exchange.head());
    log.log(py, &resp, &head, exchange.client_text(), seconds);
}

/// The environ the other line formats read for the exchange of `scope`.
#[pyfunction]
pub fn rsgi_access_environ<'py>(scope: &Bound<'py, Scope>) -> PyResult<Bound<'py, PyDict>> {
    let exchange = scope.get();
    let remote = remote_addr(scope.py(), exchange.client_text());
    head_environ(&RequestView::of(exchange.head()), &remote)
}
