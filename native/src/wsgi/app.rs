//! `WsgiApp`: what the worker gives the engine for WSGI (the app and the
//! Python parts of serving it that stay in Python: logging, hooks, proxy
//! headers, the access log).

use pyo3::prelude::*;
use pyo3::types::PyDict;

#[pyclass(module = "supervise._native", frozen)]
pub struct WsgiApp {
    pub app: Py<PyAny>,
    /// The keys every request shares (wsgi.*, SERVER_SOFTWARE, SCRIPT_NAME,
    /// SERVER_NAME/PORT for unix sockets); copied per request.
    pub base: Py<PyDict>,
    /// `on_error(environ, exc, what)`: logs an app failure with its request line.
    pub on_error: Py<PyAny>,
    /// `finished(environ, status, headers, sent, seconds)` after each
    /// response, when something wants it (access log, metrics, post_request).
    pub finished: Option<Py<PyAny>>,
    /// `proxy(environ)`: the proxy-header rules of the other workers, when
    /// `forwarded_allow_ips` trusts some peer; raises ValueError for
    /// contradictory headers (400). Called only for a request that carries
    /// one of `proxy_headers` (lower-case names): the others have nothing
    /// to rewrite, and a Python call per request cost 8% of a small one.
    pub proxy: Option<Py<PyAny>>,
    pub proxy_headers: Vec<String>,
    /// `--body-timeout`: the longest wait for more of a request body (0: none).
    pub body_timeout: f64,
    /// `--no-sendfile` turns sendfile(2) off for `file_wrapper` files.
    pub sendfile: bool,
}

#[pymethods]
impl WsgiApp {
    #[new]
    // Keyword-only from Python (wsgi_engine.py), one per part of serving.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, app, base, on_error, finished = None, proxy = None,
        proxy_headers = Vec::new(), body_timeout = 0.0, sendfile = true))]
    fn new(
        app: Py<PyAny>,
        base: Py<PyDict>,
        on_error: Py<PyAny>,
        finished: Option<Py<PyAny>>,
        proxy: Option<Py<PyAny>>,
        proxy_headers: Vec<String>,
        body_timeout: f64,
        sendfile: bool,
    ) -> Self {
        WsgiApp {
            body_timeout,
            sendfile,
            app,
            base,
            on_error,
            finished,
            proxy,
            proxy_headers,
        }
    }
}
