//! `ChunkedDecoder` for Python: each `feed` returns the payload it decoded.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use super::errors::to_pyerr;
use super::text::with_bytes;
use crate::http1_codec;

#[pyclass(module = "supervise._native", name = "ChunkedDecoder")]
pub struct ChunkedDecoder {
    inner: http1_codec::ChunkedDecoder,
    // Reused across feeds so that steady streaming allocates nothing here.
    out: Vec<u8>,
}

#[pymethods]
impl ChunkedDecoder {
    #[new]
    #[pyo3(signature = (limit_body = 0))]
    pub(crate) fn new(limit_body: u64) -> Self {
        ChunkedDecoder {
            inner: http1_codec::ChunkedDecoder::new(limit_body),
            out: Vec::new(),
        }
    }

    /// Decodes `data`; returns the payload bytes it contained (maybe b"").
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.out.clear();
        let (inner, out) = (&mut self.inner, &mut self.out);
        with_bytes(data, |b| inner.feed(b, out))?.map_err(|e| to_pyerr(py, e))?;
        Ok(PyBytes::new(py, &self.out))
    }

    #[getter]
    fn done(&self) -> bool {
        self.inner.done()
    }

    #[getter]
    fn leftover<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.leftover())
    }

    #[getter]
    fn trailers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .trailers()
            .iter()
            .map(|(n, v)| PyTuple::new(py, [PyBytes::new(py, n), PyBytes::new(py, v)]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
}
