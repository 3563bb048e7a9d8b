//! The environ values of a connection's last request, kept for its next.
//!
//! A keep-alive client sends the same Host, User-Agent, Accept and Cookie on
//! every request of a connection, and a poller or a proxy's health check the
//! same path. Making each as a new str cost about 300 instructions (the scan
//! for the widest character, an allocation, the copy) and freeing it once
//! the request was over about 100 more: a fifth of what the engine spends
//! on a small request of its own. Here the i-th value of a request is
//! compared with the i-th of the one before, and when the bytes are the
//! same the str already made is used again (strs are immutable, so sharing
//! one between two environs changes nothing an app can see).
//!
//! An ASGI scope's values are bytes and `(name, value)` tuples of bytes,
//! immutable as well, and kept the same way (`py/asgi_scope.rs`,
//! `ScopeRepeats`).
//!
//! Bounded: `SLOTS` values of a kind a connection, each at most `LONGEST`
//! bytes, so a connection holds at most about 4 KiB of each kind however
//! its client behaves; longer values are made anew each time, as before.

use pyo3::prelude::*;
use pyo3::types::PyString;

use super::text::{latin1, one_byte_storage, READS_STORAGE};

/// How many values of a request are kept: the request line's two and the
/// fields a browser sends on every request fit.
const SLOTS: usize = 12;
/// Longer values are not kept (a large Cookie is made anew each time).
const LONGEST: usize = 320;

/// Objects of one kind a connection's last request made, by their order in
/// it: the i-th of a request is offered the i-th of the one before.
pub struct Kept<T> {
    slots: Vec<Option<Py<T>>>,
    /// The next value's slot in the request being filled.
    next: usize,
    /// Off for a one-off request (the access log's environ), which keeps
    /// nothing.
    keeping: bool,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept {
            slots: Vec::new(),
            next: 0,
            keeping: false,
        }
    }
}

impl<T> Kept<T> {
    /// Keeps values from one request to the next.
    pub fn keeping() -> Self {
        Kept {
            slots: Vec::with_capacity(SLOTS),
            next: 0,
            keeping: true,
        }
    }

    /// `keeping()` when `keep`, else a `Kept` that keeps nothing.
    pub fn keeping_if(keep: bool) -> Self {
        if keep {
            Kept::keeping()
        } else {
            Kept::default()
        }
    }

    /// A new request starts at the first slot.
    pub fn start(&mut self) {
        self.next = 0;
    }

    /// The slot of the request's next value, `len` bytes long; None when it
    /// is not kept (past the slots, or too long).
    fn claim(&mut self, len: usize) -> Option<usize> {
        let i = self.next;
        if !self.keeping || i >= SLOTS {
            return None;
        }
        // A long value takes its place all the same, so that the values
        // after it meet theirs of the last request.
        self.next += 1;
        (len <= LONGEST).then_some(i)
    }

    /// What the last request left in slot `i`.
    fn seen<'a, 'py>(&'a self, py: Python<'py>, i: usize) -> Option<&'a Bound<'py, T>> {
        self.slots.get(i)?.as_ref().map(|seen| seen.bind(py))
    }

    /// Keeps `made` in slot `i` for the next request.
    fn keep(&mut self, i: usize, made: Py<T>) {
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(made);
    }

    /// The slot's object when `same` says it holds what is wanted, else a
    /// new one from `make` (kept for the next request).
    pub fn reuse<'py>(
        &mut self,
        py: Python<'py>,
        len: usize,
        same: impl FnOnce(&Bound<'py, T>) -> bool,
        make: impl FnOnce() -> PyResult<Bound<'py, T>>,
    ) -> PyResult<Bound<'py, T>> {
        let Some(i) = self.claim(len) else {
            return make();
        };
        if let Some(seen) = self.seen(py, i) {
            if same(seen) {
                return Ok(seen.clone());
            }
        }
        let made = make()?;
        self.keep(i, made.clone().unbind());
        Ok(made)
    }

    /// How many objects are held (for the tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}

/// A connection's environ values, by their order in the request.
#[derive(Default)]
pub struct Repeats(Kept<PyString>);

impl Repeats {
    /// Keeps values from one request to the next (where a kept str can be
    /// compared: `READS_STORAGE`).
    pub fn kept() -> Self {
        Repeats(Kept::keeping_if(READS_STORAGE))
    }

    /// Keeps nothing: every value is made anew.
    pub fn none() -> Self {
        Repeats::default()
    }

    /// A new request starts at the first slot.
    pub fn start(&mut self) {
        self.0.start();
    }

    /// `bytes` as a latin-1 str: the last request's str at this position
    /// when its bytes are the same, else a new one (kept for the next).
    pub fn str<'py>(&mut self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
        self.0.reuse(
            py,
            bytes.len(),
            |seen| one_byte_storage(seen) == Some(Some(bytes)),
            || latin1(py, bytes),
        )
    }

    /// How many strs are held (for the tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.0.held()
    }
}

/// A connection's `Repeats` for the Python workers: their `Connection`
/// holds one and hands it to `Request.wsgi_environ` with each request.
#[pyclass(name = "EnvironRepeats", module = "supervise._native")]
pub struct EnvironRepeats(pub Repeats);

#[pymethods]
impl EnvironRepeats {
    #[new]
    fn new() -> Self {
        EnvironRepeats(Repeats::kept())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_seen_at_the_same_place_is_the_same_str() {
        Python::initialize();
        Python::attach(|py| {
            let mut r = Repeats::kept();
            r.start();
            let host = r.str(py, b"example.com").unwrap();
            let agent = r.str(py, b"curl/8").unwrap();
            r.start();
            let host2 = r.str(py, b"example.com").unwrap();
            let other = r.str(py, b"curl/9").unwrap();
            // Where a str's storage cannot be read, nothing is kept.
            assert_eq!(host.is(&host2), READS_STORAGE);
            assert!(!agent.is(&other));
            assert_eq!(other.to_str().unwrap(), "curl/9");
            // What replaced a slot is what the next request finds there.
            r.start();
            r.str(py, b"example.com").unwrap();
            assert_eq!(other.is(r.str(py, b"curl/9").unwrap()), READS_STORAGE);
        });
    }

    #[test]
    fn latin1_bytes_make_the_same_characters_and_bounds_hold() {
        Python::initialize();
        Python::attach(|py| {
            let mut r = Repeats::kept();
            for _ in 0..2 {
                r.start();
                assert_eq!(r.str(py, b"caf\xe9").unwrap().to_str().unwrap(), "café");
            }
            r.start();
            let long = vec![b'a'; LONGEST + 1];
            for _ in 0..SLOTS + 5 {
                r.str(py, &long).unwrap();
                r.str(py, b"x").unwrap();
            }
            assert!(r.held() <= SLOTS);
            let mut none = Repeats::none();
            let a = none.str(py, b"same").unwrap();
            none.start();
            let b = none.str(py, b"same").unwrap();
            assert!(!a.is(&b));
            assert_eq!(none.held(), 0);
        });
    }
}
