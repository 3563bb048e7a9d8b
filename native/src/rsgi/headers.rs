//! `scope.headers`: a read-only mapping over the request's fields, names
//! lower-case (both parsers store them so); values decoded as latin-1, as
//! bytes on the wire may be any octet.

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::server::{FieldsOf, OwnedFields};

#[pyclass(module = "supervise._native", frozen, mapping)]
pub struct Headers {
    fields: OwnedFields,
}

impl Headers {
    pub fn new(fields: OwnedFields) -> Self {
        Headers { fields }
    }

    fn view(&self) -> FieldsOf<'_> {
        self.fields.view()
    }
}

/// A value as text: ASCII as it is, anything else byte for byte (latin-1).
pub fn value_str<'py>(py: Python<'py>, v: &[u8]) -> Bound<'py, PyString> {
    match std::str::from_utf8(v) {
        Ok(s) if v.is_ascii() => PyString::new(py, s),
        _ => {
            let s: String = v.iter().map(|&b| b as char).collect();
            PyString::new(py, &s)
        }
    }
}

/// The fields hold their names lower-case.
fn lower(key: &str) -> std::borrow::Cow<'_, str> {
    if key.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(key.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(key)
    }
}

fn name_str(name: &[u8]) -> &str {
    // A field name is a token (both parsers checked): ASCII.
    std::str::from_utf8(name).unwrap_or_default()
}

#[pymethods]
impl Headers {
    #[pyo3(signature = (key, default = None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> Py<PyAny> {
        match self.view().get(lower(key).as_ref()) {
            Some(v) => value_str(py, v).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        }
    }

    fn get_all<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyList>> {
        let name = lower(key);
        let values: Vec<_> = self
            .view()
            .all(name.as_ref())
            .map(|v| value_str(py, v))
            .collect();
        PyList::new(py, values)
    }

    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.view().names().into_iter().map(name_str))
    }

    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let values: Vec<_> = self.view().iter().map(|(_, v)| value_str(py, v)).collect();
        PyList::new(py, values)
    }

    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<_> = self
            .view()
            .iter()
            .map(|(k, v)| (PyString::new(py, name_str(k)), value_str(py, v)))
            .collect();
        PyList::new(py, items)
    }

    fn __contains__(&self, key: &str) -> bool {
        self.view().get(lower(key).as_ref()).is_some()
    }

    fn __len__(&self) -> usize {
        self.view().len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyString>> {
        match self.view().get(lower(key).as_ref()) {
            Some(v) => Ok(value_str(py, v)),
            None => Err(PyKeyError::new_err(key.to_owned())),
        }
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.keys(py)?.try_iter()?.into_any())
    }

    fn __repr__(&self) -> String {
        format!("Headers({} fields)", self.view().len())
    }
}
