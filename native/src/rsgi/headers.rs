//! `scope.headers`: a read-only mapping over the request's fields, names
//! lower-case (hyper stores them so); values decoded as latin-1, as bytes on
//! the wire may be any octet.

use hyper::header::HeaderValue;
use hyper::HeaderMap;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

#[pyclass(module = "supervise._native", frozen, mapping)]
pub struct Headers {
    map: HeaderMap,
}

impl Headers {
    pub fn new(map: HeaderMap) -> Self {
        Headers { map }
    }

    pub fn map(&self) -> &HeaderMap {
        &self.map
    }
}

pub fn value_str<'py>(py: Python<'py>, v: &HeaderValue) -> Bound<'py, PyString> {
    match v.to_str() {
        Ok(s) => PyString::new(py, s),
        Err(_) => {
            let s: String = v.as_bytes().iter().map(|&b| b as char).collect();
            PyString::new(py, &s)
        }
    }
}

fn lower(key: &str) -> std::borrow::Cow<'_, str> {
    if key.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(key.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(key)
    }
}

#[pymethods]
impl Headers {
    #[pyo3(signature = (key, default = None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> Py<PyAny> {
        match self.map.get(lower(key).as_ref()) {
            Some(v) => value_str(py, v).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        }
    }

    fn get_all<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.map
                .get_all(lower(key).as_ref())
                .iter()
                .map(|v| value_str(py, v))
                .collect::<Vec<_>>(),
        )
    }

    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.map.keys().map(|k| k.as_str()).collect::<Vec<_>>())
    }

    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.map
                .values()
                .map(|v| value_str(py, v))
                .collect::<Vec<_>>(),
        )
    }

    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.map
                .iter()
                .map(|(k, v)| (PyString::new(py, k.as_str()), value_str(py, v)))
                .collect::<Vec<_>>(),
        )
    }

    fn __contains__(&self, key: &str) -> bool {
        self.map.contains_key(lower(key).as_ref())
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyString>> {
        match self.map.get(lower(key).as_ref()) {
            Some(v) => Ok(value_str(py, v)),
            None => Err(PyKeyError::new_err(key.to_owned())),
        }
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.keys(py)?.try_iter()?.into_any())
    }

    fn __repr__(&self) -> String {
        format!("Headers({} fields)", self.map.len())
    }
}
