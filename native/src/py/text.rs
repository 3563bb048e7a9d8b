//! Bytes <-> str the WSGI way (latin-1), and borrowing bytes out of the
//! buffer types a socket read gives (bytes, bytearray, memoryview).

use std::borrow::Cow;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

/// latin-1 bytes -> str in one pass (CPython picks the narrowest storage).
pub fn latin1<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyString>> {
    // SAFETY: pointer and length describe `b`, read as 1-byte code points;
    // the result is a new reference to a str (or NULL with an exception set).
    unsafe {
        let ptr = ffi::PyUnicode_FromKindAndData(
            ffi::PyUnicode_1BYTE_KIND as std::os::raw::c_int,
            b.as_ptr().cast(),
            b.len() as ffi::Py_ssize_t,
        );
        Ok(Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked())
    }
}

/// str -> latin-1 bytes; a character above U+00FF is a ValueError (PEP 3333:
/// header strings must be latin-1).
pub fn latin1_bytes<'a>(s: &'a Bound<'_, PyString>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Some(narrow) = one_byte_storage(s) {
        return match narrow {
            Some(bytes) => Ok(Cow::Borrowed(bytes)),
            None => Err(not_latin1(s, what)),
        };
    }
    let u = s.to_str()?;
    if u.is_ascii() {
        return Ok(Cow::Borrowed(u.as_bytes()));
    }
    u.chars()
        .map(|c| u8::try_from(u32::from(c)).ok())
        .collect::<Option<Vec<u8>>>()
        .map(Cow::Owned)
        .ok_or_else(|| not_latin1(s, what))
}

fn not_latin1(s: &Bound<'_, PyString>, what: &str) -> PyErr {
    PyValueError::new_err(format!("{what} is not latin-1: {:?}", s.to_string_lossy()))
}

/// A compact str's own storage, where CPython keeps one byte a character:
/// then those bytes are its latin-1 encoding, with no conversion and no
/// UTF-8 copy cached on the str (what `to_str` makes of a non-ASCII one).
/// `Some(None)`: wider storage, so a character above U+00FF (CPython
/// stores a str in the narrowest kind that holds it). `None`: not known
/// here (a legacy str before 3.12, or an interpreter whose layout is not
/// public), for the slow path.
/// Whether `one_byte_storage` can read a str here: where it cannot, what
/// is kept to be compared with it (py/repeats.rs) would never match.
pub(crate) const READS_STORAGE: bool = cfg!(not(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14)));

#[cfg(not(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14)))]
pub(crate) fn one_byte_storage<'a>(s: &'a Bound<'_, PyString>) -> Option<Option<&'a [u8]>> {
    let op = s.as_ptr();
    // SAFETY: `op` is a live str for 'a (borrowed through `s`); a compact
    // str is always ready and its data, of GET_LENGTH characters of KIND
    // bytes each, lives inside the object and never changes.
    unsafe {
        if ffi::PyUnicode_IS_COMPACT(op) == 0 {
            return None;
        }
        if ffi::PyUnicode_KIND(op) != ffi::PyUnicode_1BYTE_KIND {
            return Some(None);
        }
        let data = ffi::_PyUnicode_COMPACT_DATA(op) as *const u8;
        let len = ffi::PyUnicode_GET_LENGTH(op) as usize;
        Some(Some(std::slice::from_raw_parts(data, len)))
    }
}

#[cfg(any(Py_LIMITED_API, PyPy, GraalPy, Py_3_14))]
pub(crate) fn one_byte_storage<'a>(_s: &'a Bound<'_, PyString>) -> Option<Option<&'a [u8]>> {
    None
}

/// Runs `f` on the bytes of a bytes, bytearray or contiguous buffer. `f` must
/// not call into Python: a bytearray could be resized under it.
pub fn with_bytes<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(f(b.as_bytes()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        // SAFETY: `f` runs no Python code, so nothing can mutate the array.
        return Ok(f(unsafe { b.as_bytes() }));
    }
    let buf = PyBuffer::<u8>::get(obj)
        .map_err(|_| PyTypeError::new_err("expected bytes, bytearray or memoryview"))?;
    if !buf.is_c_contiguous() {
        return Err(PyTypeError::new_err("expected a contiguous buffer"));
    }
    // SAFETY: a C-contiguous u8 buffer of len_bytes() bytes, kept alive by
    // `buf` for the duration of `f`, which runs no Python code.
    let slice = unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) };
    Ok(f(slice))
}
