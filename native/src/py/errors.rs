//! `ParseError(ValueError)` carrying the status and reason for the client.

use pyo3::intern;
use pyo3::prelude::*;

use crate::http1_codec;

pyo3::create_exception!(
    supervise._native,
    ParseError,
    pyo3::exceptions::PyValueError,
    "Invalid or over-limit HTTP input; `.status` is the code to answer, `.reason` why."
);

pub fn to_pyerr(py: Python<'_>, e: http1_codec::ParseError) -> PyErr {
    let err = ParseError::new_err(e.reason);
    let value = err.value(py);
    // Setting attributes on a fresh exception instance cannot fail short of
    // memory exhaustion, and then the plain error is still right to raise.
    let _ = value.setattr(intern!(py, "status"), e.status);
    let _ = value.setattr(intern!(py, "reason"), e.reason);
    err
}
