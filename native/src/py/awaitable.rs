//! An awaitable whose result is already known: `await` on it returns at once
//! without a loop turn and without an asyncio Future (two Python calls less
//! than `create_future()` + `set_result()`).

use std::sync::Mutex;

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

/// An awaitable that returns None at once: stateless, so one instance serves
/// every `send` that needs no waiting. Its `__await__` gives one shared,
/// exhausted iterator (of an empty tuple): `await` ends on its first step
/// without a StopIteration object being made, as `Ready`'s must.
#[pyclass(module = "supervise._native", frozen)]
pub struct Done;

#[pymethods]
impl Done {
    fn __await__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        static EXHAUSTED: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
        EXHAUSTED
            .get_or_try_init(py, || {
                Ok::<_, PyErr>(
                    pyo3::types::PyTuple::empty(py)
                        .try_iter()?
                        .into_any()
                        .unbind(),
                )
            })
            .map(|it| it.clone_ref(py))
    }
}

/// The one `Done`.
pub fn done(py: Python<'_>) -> Py<PyAny> {
    static DONE: pyo3::sync::PyOnceLock<Py<Done>> = pyo3::sync::PyOnceLock::new();
    DONE.get_or_init(py, || Py::new(py, Done).expect("allocating Done"))
        .clone_ref(py)
        .into_any()
}

#[pyclass(module = "supervise._native", frozen)]
pub struct Ready {
    value: Mutex<Option<Py<PyAny>>>,
}

impl Ready {
    pub fn new(value: Py<PyAny>) -> Self {
        Ready {
            value: Mutex::new(Some(value)),
        }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<()> {
        let value = self
            .value
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| py.None());
        Err(PyStopIteration::new_err((value,)))
    }
}
