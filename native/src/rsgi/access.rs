//! The access line of an RSGI exchange, read from the head its scope holds
//! (`logs.Logger.access_exchange`): no environ dict is built for a text line.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::scope::Scope;
use crate::bridge::RequestView;
use crate::py::access_format::{head_environ, remote_addr, AccessFormat};

/// The text line `format` makes for the exchange of `scope`.
#[pyfunction]
pub fn rsgi_access_line<'py>(
    format: &Bound<'py, AccessFormat>,
    resp: &Bound<'py, PyAny>,
    scope: &Bound<'py, Scope>,
    rt: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyString>> {
    let exchange = scope.get();
    let remote = remote_addr(scope.py(), exchange.client_text());
    let head = RequestView::of(exchange.head());
    format.get().line_for_head(resp, &head, &remote, rt)
}

/// The environ the other line formats read for that exchange.
#[pyfunction]
pub fn rsgi_access_environ<'py>(scope: &Bound<'py, Scope>) -> PyResult<Bound<'py, PyDict>> {
    let exchange = scope.get();
    let remote = remote_addr(scope.py(), exchange.client_text());
    head_environ(&RequestView::of(exchange.head()), &remote)
}
