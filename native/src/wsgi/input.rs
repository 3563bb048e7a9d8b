//! `wsgi.input` over a body read whole before the app was called: reads are
//! slices of one buffer, or reads of the spooled file at an offset, never a
//! wait on the network.

use std::os::unix::fs::FileExt;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::spool::RequestBody;

/// How much of a spooled body one step of a line search reads.
const LINE_BLOCK: usize = 8 * 1024;

#[pyclass(module = "supervise._native")]
pub struct WsgiInput {
    body: RequestBody,
    pos: u64,
}

impl WsgiInput {
    pub fn new(body: RequestBody) -> Self {
        WsgiInput { body, pos: 0 }
    }

    fn left(&self) -> u64 {
        let len = match &self.body {
            RequestBody::Memory(data) => data.len() as u64,
            RequestBody::File { len, .. } => *len,
        };
        len - self.pos
    }

    /// What is left, or `limit` of it (all when negative or None).
    fn at_most(&self, limit: Option<isize>) -> u64 {
        match limit {
            Some(n) if n >= 0 => self.left().min(n as u64),
            _ => self.left(),
        }
    }

    /// Up to `limit` bytes (all when negative or None), and moves past them.
    fn take<'py>(
        &mut self,
        py: Python<'py>,
        limit: Option<isize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let n = self.at_most(limit) as usize;
        let start = self.pos;
        let out = match &self.body {
            RequestBody::Memory(data) => {
                PyBytes::new(py, &data[start as usize..start as usize + n])
            }
            RequestBody::File { file, .. } => PyBytes::new_with(py, n, |buf| {
                file.read_exact_at(buf, start).map_err(PyErr::from)
            })?,
        };
        self.pos += n as u64;
        Ok(out)
    }

    /// The length of the next line, its newline included, at most `cap`.
    fn line_length(&self, cap: u64) -> PyResult<u64> {
        match &self.body {
            RequestBody::Memory(data) => {
                let left = &data[self.pos as usize..];
                let end = left
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(left.len(), |i| i + 1);
                Ok((end as u64).min(cap))
            }
            RequestBody::File { file, .. } => {
                let mut block = [0u8; LINE_BLOCK];
                let mut seen = 0u64;
                while seen < cap {
                    let want = (cap - seen).min(LINE_BLOCK as u64) as usize;
                    file.read_exact_at(&mut block[..want], self.pos + seen)?;
                    if let Some(i) = block[..want].iter().position(|&b| b == b'\n') {
                        return Ok(seen + i as u64 + 1);
                    }
                    seen += want as u64;
                }
                Ok(cap)
            }
        }
    }

    fn line<'py>(
        &mut self,
        py: Python<'py>,
        limit: Option<isize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let n = self.line_length(self.at_most(limit))?;
        self.take(py, Some(n as isize))
    }
}

#[pymethods]
impl WsgiInput {
    #[pyo3(signature = (size = None))]
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> PyResult<Bound<'py, PyBytes>> {
        self.take(py, size)
    }

    #[pyo3(signature = (size = None))]
    fn readline<'py>(
        &mut self,
        py: Python<'py>,
        size: Option<isize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
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
        while self.left() > 0 {
            let line = self.line(py, None)?;
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

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        if self.left() == 0 {
            Ok(None)
        } else {
            self.line(py, None).map(Some)
        }
    }
}
