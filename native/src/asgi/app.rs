//! What the engine needs of an ASGI app: the coroutine to start per request
//! (the Python wrapper around the app, `http/asgi_engine.py`) and the scope
//! keys every request shares.

use hyper::http::request::Parts;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::py::asgi_scope;
use crate::rsgi::forwarded::Proxied;
use crate::server::ConnInfo;
use crate::wsgi::HyperHead;

#[pyclass(module = "supervise._native", frozen)]
pub struct AsgiApp {
    /// `handler(scope, cycle)` returns the coroutine that runs the app.
    pub(crate) handler: Py<PyAny>,
    root_path: String,
    /// The `asgi` key: {"version": "3.0", "spec_version": ...}.
    asgi: Py<PyDict>,
    /// What the lifespan startup left in its state; each request gets a copy.
    state: Py<PyDict>,
    /// The extensions the engine implements, one dict for every request.
    extensions: Py<PyDict>,
}

#[pymethods]
impl AsgiApp {
    #[new]
    #[pyo3(signature = (*, handler, root_path, asgi, state, extensions))]
    fn new(
        handler: Py<PyAny>,
        root_path: String,
        asgi: Py<PyDict>,
        state: Py<PyDict>,
        extensions: Py<PyDict>,
    ) -> Self {
        AsgiApp {
            handler,
            root_path,
            asgi,
            state,
            extensions,
        }
    }
}

impl AsgiApp {
    /// The `http` scope of one request.
    pub fn http_scope<'py>(
        &self,
        py: Python<'py>,
        head: &Parts,
        conn: &ConnInfo,
        proxied: &Proxied,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scope = PyDict::new(py);
        scope.set_item(intern!(py, "type"), intern!(py, "http"))?;
        scope.set_item(intern!(py, "asgi"), self.asgi.bind(py))?;
        let scheme = proxied.scheme.as_deref().unwrap_or(conn.scheme);
        scope.set_item(intern!(py, "scheme"), scheme)?;
        let client = proxied.client.as_deref().unwrap_or(&conn.client);
        scope.set_item(intern!(py, "client"), asgi_scope::address(py, client)?)?;
        scope.set_item(
            intern!(py, "server"),
            asgi_scope::address(py, &conn.server)?,
        )?;
        scope.set_item(intern!(py, "root_path"), &self.root_path)?;
        scope.set_item(intern!(py, "state"), self.state.bind(py).copy()?)?;
        scope.set_item(intern!(py, "extensions"), self.extensions.bind(py))?;
        asgi_scope::fill(&scope, &HyperHead::new(head), &self.root_path, true, None)?;
        Ok(scope)
    }
}
