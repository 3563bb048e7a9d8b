//! The request body's half of `AsgiCycle` (`cycle.rs`, whose
//! `#[pymethods]` call these): bytes from the connection into the cycle,
//! with reading paused while the app lags, and out to the app's `receive`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::{joined, monotonic, AsgiCycle, AsgiHttpConnection, ResponseState};
use crate::py::awaitable::Ready;

/// Request body buffered for the app past which reading pauses.
const BODY_HIGH_WATER: u64 = 256 * 1024;

impl AsgiCycle {
    /// Takes body bytes from the connection; returns what follows the body
    /// (the next request's bytes). Reading pauses past `BODY_HIGH_WATER`
    /// bytes the app has not taken; a chunked body that breaks its framing
    /// goes to the subclass's `_bad_body`.
    pub(in crate::asgi::worker) fn feed_body_impl<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyBytes>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let py = slf.py();
        let now = monotonic(py)?;
        let bytes = data.as_bytes();
        let empty = || PyBytes::new(py, b"");
        let decoder = {
            let mut me = slf.borrow_mut();
            me.last_read = now;
            me.decoder.as_ref().map(|d| d.clone_ref(py))
        };
        let (payload, leftover) = match decoder {
            Some(decoder) => {
                let mut decoder = decoder.borrow_mut(py);
                let payload = match decoder.decode(bytes) {
                    Ok(payload) => PyBytes::new(py, payload),
                    Err(e) => {
                        drop(decoder);
                        slf.call_method1(intern!(py, "_bad_body"), (e.status, e.reason))?;
                        return Ok(empty());
                    }
                };
                let leftover = if decoder.is_done() {
                    slf.borrow_mut().body_pending = false;
                    PyBytes::new(py, decoder.rest())
                } else {
                    empty()
                };
                (payload, leftover)
            }
            None => {
                let mut me = slf.borrow_mut();
                if bytes.len() as u64 <= me.remaining {
                    me.remaining -= bytes.len() as u64;
                    me.body_pending = me.remaining > 0;
                    (data.clone(), empty())
                } else {
                    let cut = me.remaining as usize;
                    me.remaining = 0;
                    me.body_pending = false;
                    (
                        PyBytes::new(py, &bytes[..cut]),
                        PyBytes::new(py, &bytes[cut..]),
                    )
                }
            }
        };
        let size = payload.as_bytes().len() as u64;
        if size > 0 {
            let (body, buffered, proto) = {
                let mut me = slf.borrow_mut();
                me.body_size += size;
                (me.body.clone_ref(py), me.body_size, me.proto.clone_ref(py))
            };
            body.bind(py).append(payload)?;
            if buffered > BODY_HIGH_WATER {
                AsgiHttpConnection::pause_reading(proto.bind(py))?;
            }
        }
        Self::wake_impl(slf)?;
        Ok(leftover)
    }

    /// The app's `receive`. The body that has arrived is given at once (an
    /// awaitable already done) when there is some or no more will come;
    /// anything that must wait (body bytes, the response's end, the
    /// client's going) is the subclass's `_receive_slow` coroutine.
    pub(super) fn receive_impl<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let ready = {
            let me = slf.borrow();
            !me.body_delivered
                && !me.gone
                && me.response != ResponseState::Complete
                && (!me.body_pending || !me.body.bind(py).is_empty())
        };
        if !ready {
            return slf.call_method0(intern!(py, "_receive_slow"));
        }
        let message = Self::take_body_impl(slf)?;
        Ok(Bound::new(py, Ready::new(message.into_any().unbind()))?.into_any())
    }

    /// The body the app has not taken, as its next `http.request` message;
    /// reading resumes if more is to come.
    pub(super) fn take_body_impl<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let (body, pending, proto) = {
            let mut me = slf.borrow_mut();
            me.body_size = 0;
            me.body_delivered = !me.body_pending;
            (
                me.body.clone_ref(py),
                me.body_pending,
                me.proto.clone_ref(py),
            )
        };
        let body = body.bind(py);
        let parts = body
            .iter()
            .map(|part| part.cast_into::<PyBytes>().map_err(PyErr::from))
            .collect::<PyResult<Vec<_>>>()?;
        let whole = match parts.as_slice() {
            [one] => one.clone(),
            _ => joined(py, &parts.iter().map(|p| p.as_bytes()).collect::<Vec<_>>())?,
        };
        body.del_slice(0, parts.len())?;
        if pending {
            AsgiHttpConnection::resume_reading(proto.bind(py))?;
        }
        let message = PyDict::new(py);
        message.set_item(intern!(py, "type"), intern!(py, "http.request"))?;
        message.set_item(intern!(py, "body"), whole)?;
        message.set_item(intern!(py, "more_body"), pending)?;
        Ok(message)
    }

    /// Wakes what waits in `receive` (body bytes came, the client left, the
    /// response ended).
    pub(super) fn wake_impl(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let Some(waiter) = slf.borrow_mut().waiter.take() else {
            return Ok(());
        };
        let waiter = waiter.bind(py);
        if !waiter.call_method0(intern!(py, "done"))?.is_truthy()? {
            waiter.call_method1(intern!(py, "set_result"), (py.None(),))?;
        }
        Ok(())
    }
}
