//! The PROXY protocol parser (`crate::proxy`) for the Python workers.

use pyo3::prelude::*;

use super::text::with_bytes;
use crate::proxy::{self, Outcome};

pyo3::create_exception!(
    supervise._native,
    ProxyHeaderError,
    pyo3::exceptions::PyValueError,
    "The bytes a trusted peer sent are not a valid PROXY protocol header."
);

/// A complete PROXY header (immutable).
#[pyclass(module = "supervise._native", frozen)]
pub struct ProxyHeader {
    /// 1 or 2.
    #[pyo3(get)]
    version: u8,
    /// The header's length: the bytes after it belong to TLS or HTTP.
    #[pyo3(get)]
    consumed: usize,
    /// "TCP4", "TCP6", "UNIX" or "UNKNOWN".
    #[pyo3(get)]
    family: &'static str,
    /// (host, port) of the client; None keeps the connection's own peer.
    #[pyo3(get)]
    source: Option<(String, u16)>,
    #[pyo3(get)]
    destination: Option<(String, u16)>,
    /// A version 2 LOCAL header (the proxy's own connection).
    #[pyo3(get)]
    local: bool,
}

#[pymethods]
impl ProxyHeader {
    fn __repr__(&self) -> String {
        let source = match &self.source {
            Some((host, port)) => format!("({host:?}, {port})"),
            None => "None".to_string(),
        };
        format!(
            "ProxyHeader(version={}, family={:?}, source={source}, consumed={})",
            self.version, self.family, self.consumed
        )
    }
}

fn pair(a: Option<std::net::SocketAddr>) -> Option<(String, u16)> {
    a.map(|a| (a.ip().to_string(), a.port()))
}

/// The header at the start of `buf` (every byte received so far), None while
/// it is incomplete; ProxyHeaderError when no more bytes can make it valid.
#[pyfunction]
pub fn parse_proxy_header(buf: &Bound<'_, PyAny>) -> PyResult<Option<ProxyHeader>> {
    match with_bytes(buf, proxy::parse)? {
        Outcome::Incomplete => Ok(None),
        Outcome::Invalid(why) => Err(ProxyHeaderError::new_err(why)),
        Outcome::Parsed(h) => Ok(Some(ProxyHeader {
            version: h.version,
            consumed: h.consumed,
            family: h.family.name(),
            source: pair(h.source),
            destination: pair(h.destination),
            local: h.local,
        })),
    }
}
