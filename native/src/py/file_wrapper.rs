//! `wsgi.file_wrapper` (PEP 3333's optional platform-specific file
//! handling) for every WSGI worker class. Native, because an app makes one
//! per file response: the Python class with an `__init__` it replaced cost
//! five times as much to build (540 ns against 110), and the engine reads
//! the file object straight from the struct instead of through `getattr`.
//!
//! What an app or middleware may rely on, as wsgiref's has it: the
//! `filelike` and `blksize` attributes, iteration in `blksize` reads until
//! one comes back empty, and `close()`, which closes the file object when
//! it has a `close`. The server sends a regular file itself (sendfile or
//! reads in Rust); anything else it iterates.

use pyo3::prelude::*;

/// wsgiref's default block size, which PEP 3333 leaves to the server.
const DEFAULT_BLKSIZE: isize = 8192;

#[pyclass(module = "supervise._native", frozen)]
pub struct FileWrapper {
    #[pyo3(get)]
    filelike: Py<PyAny>,
    /// What each iteration asks `filelike.read()` for (a negative size
    /// reads the rest, as `read` itself takes it).
    #[pyo3(get)]
    blksize: isize,
}

impl FileWrapper {
    /// The file object the app gave.
    pub(crate) fn file<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.filelike.bind(py)
    }
}

#[pymethods]
impl FileWrapper {
    #[new]
    #[pyo3(signature = (filelike, blksize = DEFAULT_BLKSIZE))]
    fn new(filelike: Py<PyAny>, blksize: isize) -> Self {
        FileWrapper { filelike, blksize }
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next block; StopIteration once a read comes back empty.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let data = self
            .filelike
            .bind(py)
            .call_method1(pyo3::intern!(py, "read"), (self.blksize,))?;
        Ok(data.is_truthy()?.then(|| data.unbind()))
    }

    /// The server calls this once the response is over (PEP 3333's
    /// `close()` of the iterable): the file object's own, when it has one.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let filelike = self.filelike.bind(py);
        match filelike.getattr_opt(pyo3::intern!(py, "close"))? {
            Some(close) => close.call0().map(drop),
            None => Ok(()),
        }
    }
}
