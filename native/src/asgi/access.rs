//! The access line of an ASGI request on the engine, read from the head the
//! server parsed (`HttpCycle` keeps it; the scope dict the app had is not
//! read back): written natively (`AccessLog`) for text lines, or the environ
//! the other formats read (`asgi_access_environ`), the one `environ::fill`
//! gives the WSGI classes.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::cycle::HttpCycle;
use crate::bridge::RequestView;
use crate::py::access_format::{head_environ, remote_addr, AccessLog, KnownResponse};

/// Writes the line of the request `cycle` served.
pub(super) fn log_request(py: Python<'_>, log: &AccessLog, cycle: &HttpCycle, seconds: f64) {
    let resp = KnownResponse {
        status: cycle._status(),
        sent: Some(cycle._sent()),
        headers: cycle.kept_fields(py).map(Bound::into_any),
    };
    let head = RequestView::of(cycle.head());
    log.log(py, &resp, &head, cycle.client(), seconds);
}

/// The environ the other line formats read for that request.
#[pyfunction]
pub fn asgi_access_environ<'py>(cycle: &Bound<'py, HttpCycle>) -> PyResult<Bound<'py, PyDict>> {
    let request = cycle.get();
    let remote = remote_addr(cycle.py(), request.client());
    head_environ(&RequestView::of(request.head()), &remote)
}
