//! What the engine needs of an ASGI app: the app itself, the worker's
//! callables that log how a request ended (`http/asgi_engine.py`; `AppRun`
//! calls them), and the scope keys every request shares.

use std::sync::Arc;

use hyper::http::request::Parts;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict};

use super::conn_scope::ConnScope;
use crate::bridge::{AppCalls, Bridge, HyperHead, Proxied, RequestView};
use crate::py::access_format::AccessLog;
use crate::py::asgi_scope::{self, ScopeRepeats};
use crate::server::{ConnInfo, ExchangeHead, TlsInfo};

#[pyclass(module = "supervise._native", frozen)]
pub struct AsgiApp {
    /// The app and the worker's callables for how a request ended
    /// (`AppRun`, native/src/bridge/app_run.rs).
    pub(crate) calls: Py<AppCalls>,
    /// `ws_handler(scope, protocol)`: the same for a WebSocket handshake,
    /// over the RSGI WebSocket protocol object (`http/asgi_engine_ws.py`).
    pub(crate) ws_handler: Py<PyAny>,
    root_path: String,
    /// The `asgi` key: {"version": "3.0", "spec_version": ...}.
    asgi: Py<PyDict>,
    /// What the lifespan startup left in its state; each request gets a copy.
    state: Py<PyDict>,
    /// The extensions the engine implements, one dict for every request.
    extensions: Py<PyDict>,
    /// The same and `http.response.early_hint`, for requests on connections
    /// that can write a 103 (`Tracker::interim`).
    hinted_extensions: Py<PyDict>,
    /// The tls extension's `server_cert` (PEM), read from the certfile once.
    server_cert: Option<String>,
}

#[pymethods]
impl AsgiApp {
    #[new]
    #[pyo3(signature = (*, app, log_outcome, done, ws_handler, root_path, asgi, state, extensions,
        server_cert = None, access = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        app: Py<PyAny>,
        log_outcome: Py<PyAny>,
        done: Option<Py<PyAny>>,
        ws_handler: Py<PyAny>,
        root_path: String,
        asgi: Py<PyDict>,
        state: Py<PyDict>,
        extensions: Py<PyDict>,
        server_cert: Option<String>,
        access: Option<Py<AccessLog>>,
    ) -> PyResult<Self> {
        let hinted = extensions.bind(py).copy()?;
        hinted.set_item("http.response.early_hint", PyDict::new(py))?;
        Ok(AsgiApp {
            calls: Py::new(py, AppCalls::new(app, log_outcome, done, access))?,
            ws_handler,
            root_path,
            asgi,
            state,
            extensions,
            hinted_extensions: hinted.unbind(),
            server_cert,
        })
    }
}

impl AsgiApp {
    /// The `http` scope of one request; `hints`: its connection can write
    /// early hints; `bridge`: the loop's, where the connection's kept
    /// objects are dropped.
    pub fn http_scope<'py>(
        &self,
        py: Python<'py>,
        head: &ExchangeHead,
        conn: &ConnInfo,
        proxied: &Proxied,
        hints: bool,
        bridge: &Arc<Bridge>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kept = ConnScope::of(conn, || {
            let base = self.http_base(py, conn, hints)?;
            Ok(ConnScope::new(base, hints, bridge.clone()))
        })?;
        let scope = kept.http_base(py).copy()?;
        if hints != kept.hints {
            scope.set_item(intern!(py, "extensions"), self.extensions(py, conn, hints)?)?;
        }
        if let Some(client) = &proxied.client {
            scope.set_item(intern!(py, "client"), asgi_scope::address(py, client)?)?;
        }
        if let Some(scheme) = &proxied.scheme {
            scope.set_item(intern!(py, "scheme"), scheme)?;
        }
        scope.set_item(intern!(py, "state"), self.state.bind(py).copy()?)?;
        let view = RequestView::of(head);
        asgi_scope::fill(
            &scope,
            &view,
            &self.root_path,
            true,
            None,
            &mut kept.repeats(),
        )?;
        Ok(scope)
    }

    /// What every http scope of `conn` starts from: the connection's keys,
    /// and the request's as None placeholders (so that a copy has room for
    /// them all).
    fn http_base<'py>(
        &self,
        py: Python<'py>,
        conn: &ConnInfo,
        hints: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scope = self.base(py, conn, &Proxied::default())?;
        scope.set_item(intern!(py, "type"), intern!(py, "http"))?;
        scope.set_item(intern!(py, "scheme"), conn.scheme)?;
        scope.set_item(intern!(py, "extensions"), self.extensions(py, conn, hints)?)?;
        for key in [
            intern!(py, "http_version"),
            intern!(py, "method"),
            intern!(py, "path"),
            intern!(py, "raw_path"),
            intern!(py, "query_string"),
            intern!(py, "headers"),
            intern!(py, "state"),
        ] {
            scope.set_item(key, py.None())?;
        }
        Ok(scope)
    }

    /// The extensions of an http scope of `conn`.
    fn extensions<'py>(
        &self,
        py: Python<'py>,
        conn: &ConnInfo,
        hints: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let extensions = if hints {
            &self.hinted_extensions
        } else {
            &self.extensions
        };
        match &conn.tls {
            None => Ok(extensions.bind(py).clone()),
            Some(tls) => {
                let with_tls = extensions.bind(py).copy()?;
                with_tls.set_item("tls", tls_extension(py, tls, self.server_cert.as_deref())?)?;
                Ok(with_tls)
            }
        }
    }

    /// The `websocket` scope of a handshake request.
    pub fn websocket_scope<'py>(
        &self,
        py: Python<'py>,
        head: &Parts,
        conn: &ConnInfo,
        proxied: &Proxied,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scope = self.base(py, conn, proxied)?;
        scope.set_item(intern!(py, "type"), intern!(py, "websocket"))?;
        let scheme = proxied.scheme.as_deref().unwrap_or(conn.scheme);
        let scheme = if scheme == "https" { "wss" } else { "ws" };
        scope.set_item(intern!(py, "scheme"), scheme)?;
        let offered: Vec<String> = head
            .headers
            .get_all(hyper::header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(|p| String::from_utf8_lossy(p.trim_ascii()).into_owned())
            .filter(|p| !p.is_empty())
            .collect();
        scope.set_item(intern!(py, "subprotocols"), offered)?;
        let extensions = PyDict::new(py);
        extensions.set_item("websocket.http.response", PyDict::new(py))?;
        if let Some(tls) = &conn.tls {
            extensions.set_item("tls", tls_extension(py, tls, self.server_cert.as_deref())?)?;
        }
        scope.set_item(intern!(py, "extensions"), extensions)?;
        let view = HyperHead::new(head);
        let mut repeats = ScopeRepeats::none();
        asgi_scope::fill(&scope, &view, &self.root_path, false, None, &mut repeats)?;
        Ok(scope)
    }

    /// The keys every scope of the connection shares.
    fn base<'py>(
        &self,
        py: Python<'py>,
        conn: &ConnInfo,
        proxied: &Proxied,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scope = PyDict::new(py);
        scope.set_item(intern!(py, "asgi"), self.asgi.bind(py))?;
        let client = proxied.client.as_deref().unwrap_or(&conn.client);
        scope.set_item(intern!(py, "client"), asgi_scope::address(py, client)?)?;
        scope.set_item(
            intern!(py, "server"),
            asgi_scope::address(py, &conn.server)?,
        )?;
        scope.set_item(intern!(py, "root_path"), &self.root_path)?;
        scope.set_item(intern!(py, "state"), self.state.bind(py).copy()?)?;
        Ok(scope)
    }
}

/// ASGI's `tls` extension, as the asgi worker gives it: the client's chain in
/// PEM (Python's own conversion, so both servers give the same text) and its
/// subject (x509_name.rs, as in the asgi worker), the certfile's first
/// certificate; no verification error: an unverified client certificate
/// fails the handshake.
fn tls_extension<'py>(
    py: Python<'py>,
    tls: &TlsInfo,
    server_cert: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    static TO_PEM: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let to_pem = TO_PEM.import(py, "ssl", "DER_cert_to_PEM_cert")?;
    let chain = tls
        .client_chain
        .iter()
        .map(|der| to_pem.call1((PyBytes::new(py, der),)))
        .collect::<PyResult<Vec<_>>>()?;
    let known = |n: u16| (n != 0).then_some(n);
    let extension = PyDict::new(py);
    extension.set_item("server_cert", server_cert)?;
    extension.set_item("client_cert_chain", chain)?;
    let name = tls
        .client_chain
        .first()
        .and_then(|der| crate::x509_name::subject_text(der));
    extension.set_item("client_cert_name", name)?;
    extension.set_item("client_cert_error", py.None())?;
    extension.set_item("tls_version", known(tls.version))?;
    extension.set_item("cipher_suite", known(tls.cipher_suite))?;
    Ok(extension)
}
