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

impl ChunkedDecoder {
    /// Decodes `data`: the payload it contained (maybe empty), or why the
    /// body is refused.
    pub(crate) fn decode(&mut self, data: &[u8]) -> Result<&[u8], http1_codec::ParseError> {
        self.out.clear();
        self.inner.feed(data, &mut self.out)?;
        Ok(&self.out)
    }

    pub(crate) fn is_done(&self) -> bool {
        self.inner.done()
    }

    pub(crate) fn rest(&self) -> &[u8] {
        self.inner.leftover()
    }
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
        with_bytes(data, |b| self.decode(b).map(drop))?.map_err(|e| to_pyerr(py, e))?;
        Ok(PyBytes::new(py, &self.out))
    }

    #[getter]
    fn done(&self) -> bool {
        self.is_done()
    }

    #[getter]
    fn leftover<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.rest())
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
