//! The access line of an ASGI request on the engine, read from the head the
//! server parsed (`logs.Logger.access_exchange`): the scope dict the app
//! was given is not read back, and no environ dict is built for a text line.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::cycle::HttpCycle;
use crate::bridge::RequestView;
use crate::py::access_format::{head_environ, remote_addr, AccessFormat};

/// The text line `format` makes for the request `cycle` served.
#[pyfunction]
pub fn asgi_access_line<'py>(
    format: &Bound<'py, AccessFormat>,
    resp: &Bound<'py, PyAny>,
    cycle: &Bound<'py, HttpCycle>,
    rt: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyString>> {
    let request = cycle.get();
    let remote = remote_addr(cycle.py(), request.client());
    let head = RequestView::of(request.head());
    format.get().line_for_head(resp, &head, &remote, rt)
}

/// The environ the other line formats read for that request.
#[pyfunction]
pub fn asgi_access_environ<'py>(cycle: &Bound<'py, HttpCycle>) -> PyResult<Bound<'py, PyDict>> {
    let request = cycle.get();
    let remote = remote_addr(cycle.py(), request.client());
    head_environ(&RequestView::of(request.head()), &remote)
}
