//! The exceptions an RSGI app may catch (the same names as Granian's).

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;

// Misuse of the protocol: a second body read, a body over the limit.
create_exception!(_native, RSGIProtocolError, PyRuntimeError);
// The client is gone: a send on a closed stream, a read on a cut connection.
create_exception!(_native, RSGIProtocolClosed, PyRuntimeError);

/// `Outcome::Raise`'s maker of an `RSGIProtocolError`.
pub fn protocol_error(_py: pyo3::Python<'_>, msg: &'static str) -> pyo3::PyErr {
    RSGIProtocolError::new_err(msg)
}

/// `Outcome::Raise`'s maker of an `RSGIProtocolClosed`.
pub fn closed(_py: pyo3::Python<'_>, msg: &'static str) -> pyo3::PyErr {
    RSGIProtocolClosed::new_err(msg)
}
