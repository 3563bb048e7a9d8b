//! `StaticFiles` for the Python workers: the same decisions the native
//! server makes (`crate::static_files`), for a request `RequestParser` read.

use std::os::fd::IntoRawFd;
use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use super::request::Request;
use crate::static_files::{Decision, StaticBody, StaticRequest};

/// `--static-map` and its settings, with each folder resolved once.
#[pyclass(module = "supervise._native", frozen)]
pub struct StaticFiles {
    inner: crate::static_files::StaticFiles,
}

#[pymethods]
impl StaticFiles {
    /// `static_map`: "PREFIX=DIR" strings; ValueError with one line naming
    /// the folder when one cannot be served.
    #[new]
    #[pyo3(signature = (static_map, cache_control=None, immutable=false, fallthrough=false, follow_symlinks=false))]
    fn new(
        static_map: Vec<String>,
        cache_control: Option<String>,
        immutable: bool,
        fallthrough: bool,
        follow_symlinks: bool,
    ) -> PyResult<Self> {
        let maps = static_map
            .iter()
            .map(|m| match m.split_once('=') {
                Some((prefix, dir)) => Ok((prefix.to_owned(), PathBuf::from(dir))),
                None => Err(PyValueError::new_err(format!(
                    "static_map {m:?}: write PREFIX=DIR"
                ))),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let inner = crate::static_files::StaticFiles::new(
            &maps,
            cache_control,
            immutable,
            fallthrough,
            follow_symlinks,
        )
        .map_err(PyValueError::new_err)?;
        Ok(StaticFiles { inner })
    }

    /// Whether `raw_path` is under a prefix (a cheap test before `decide`).
    fn claims(&self, raw_path: &[u8]) -> bool {
        self.inner.claims(raw_path)
    }

    /// The answer to `req`, or `None` when it is the app's: `(status,
    /// headers, body)`, the headers without Content-Length, the body `None`
    /// (304), `bytes` (a short text) or `(fd, offset, length)`: an open file
    /// the caller now owns and must close.
    fn decide<'py>(
        &self,
        py: Python<'py>,
        req: PyRef<'py, Request>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let h = req.head();
        let decision = self
            .inner
            .decide(&StaticRequest::of(h.method(), h.raw_path(), |n| {
                h.header(n)
            }));
        let Decision::Answer(answer) = decision else {
            return Ok(None);
        };
        let body: Bound<'py, PyAny> = match answer.body {
            StaticBody::Nothing => py.None().into_bound(py),
            StaticBody::Text(text) => PyBytes::new(py, text.as_bytes()).into_any(),
            StaticBody::File { file, offset, len } => (file.into_raw_fd(), offset, len)
                .into_pyobject(py)?
                .into_any(),
        };
        Ok(Some(PyTuple::new(
            py,
            [
                answer.status.into_pyobject(py)?.into_any(),
                answer.headers.into_pyobject(py)?.into_any(),
                body,
            ],
        )?))
    }
}
