//! `NativeTls`: the rustls server configuration, built by the worker from the
//! TLS settings before it reports ready, so that a bad certificate or key
//! fails the boot with one line instead of every connection later.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::server::{load_tls, ClientAuth, TlsFiles};

#[pyclass(module = "supervise._native", frozen)]
pub struct NativeTls {
    pub config: Arc<rustls::ServerConfig>,
}

#[pymethods]
impl NativeTls {
    /// `cert_reqs`: 0 (none), 1 (optional) or 2 (required), as `ssl.CERT_*`.
    /// Raises ValueError with a one-line reason.
    #[new]
    #[pyo3(signature = (*, certfile, keyfile = None, password = None, ca_certs = None, cert_reqs = 0))]
    fn new(
        py: Python<'_>,
        certfile: PathBuf,
        keyfile: Option<PathBuf>,
        password: Option<String>,
        ca_certs: Option<PathBuf>,
        cert_reqs: u8,
    ) -> PyResult<Self> {
        let client_auth = match cert_reqs {
            0 => ClientAuth::None,
            1 => ClientAuth::Optional,
            2 => ClientAuth::Required,
            other => {
                return Err(PyValueError::new_err(format!(
                    "cert_reqs must be 0, 1 or 2, not {other}"
                )))
            }
        };
        let files = TlsFiles {
            certfile: &certfile,
            keyfile: keyfile.as_deref(),
            password: password.as_deref(),
            ca_certs: ca_certs.as_deref(),
            client_auth,
        };
        // Key decryption (scrypt) can take a while: not with the GIL held.
        let config = py
            .detach(|| load_tls(&files))
            .map_err(PyValueError::new_err)?;
        Ok(NativeTls {
            config: Arc::new(config),
        })
    }

    fn __repr__(&self) -> String {
        "<NativeTls>".to_owned()
    }
}
