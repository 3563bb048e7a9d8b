//! `wsgi.input` over a body read whole before the app was called: reads are
//! slices of one buffer, never a wait on the network.

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

#[pyclass(module = "supervise._native")]
pub struct WsgiInput {
    data: Bytes,
    pos: usize,
}

impl WsgiInput {
    pub fn new(data: Bytes) -> Self {
        WsgiInput { data, pos: 0 }
    }

    fn left(&self) -> &[u8] {
        &self.data[self.pos..]
    }

    /// Up to `limit` bytes (all when negative or None), and moves past them.
    fn take<'py>(&mut self, py: Python<'py>, limit: Option<isize>) -> Bound<'py, PyBytes> {
        let left = self.left().len();
        let n = match limit {
            Some(n) if n >= 0 => left.min(n as usize),
            _ => left,
        };
        let out = PyBytes::new(py, &self.data[self.pos..self.pos + n]);
        self.pos += n;
        out
    }

    fn line<'py>(&mut self, py: Python<'py>, limit: Option<isize>) -> Bound<'py, PyBytes> {
        let end = self
            .left()
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.left().len(), |i| i + 1);
        let n = match limit {
            Some(n) if n >= 0 => end.min(n as usize),
            _ => end,
        };
        self.take(py, Some(n as isize))
    }
}

#[pymethods]
impl WsgiInput {
    #[pyo3(signature = (size = None))]
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> Bound<'py, PyBytes> {
        self.take(py, size)
    }

    #[pyo3(signature = (size = None))]
    fn readline<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> Bound<'py, PyBytes> {
        self.line(py, size)
    }

    /// Lines until `hint` bytes were read (all when it is not positive).
    #[pyo3(signature = (hint = None))]
    fn readlines<'py>(
        &mut self,
        py: Python<'py>,
        hint: Option<isize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let lines = PyList::empty(py);
        let mut total = 0usize;
        while !self.left().is_empty() {
            let line = self.line(py, None);
            total += line.as_bytes().len();
            lines.append(line)?;
            if matches!(hint, Some(h) if h > 0 && total >= h as usize) {
                break;
            }
        }
        Ok(lines)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        if self.left().is_empty() {
            None
        } else {
            Some(self.line(py, None))
        }
    }
}
