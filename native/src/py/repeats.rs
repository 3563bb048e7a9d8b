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
//! Bounded: `SLOTS` values a connection, each at most `LONGEST` bytes, so a
//! connection holds at most about 4 KiB here however its client behaves;
//! longer values are made anew each time, as before.

use pyo3::prelude::*;
use pyo3::types::PyString;

use super::text::{latin1, one_byte_storage};

/// How many values of a request are kept: the request line's two and the
/// fields a browser sends on every request fit.
const SLOTS: usize = 12;
/// Longer values are not kept (a large Cookie is made anew each time).
const LONGEST: usize = 320;

/// A connection's values, by their order in the request.
#[derive(Default)]
pub struct Repeats {
    slots: Vec<Option<Py<PyString>>>,
    /// The next value's slot in the request being filled.
    next: usize,
    /// Off for a one-off environ (the access log's), which keeps nothing.
    keeping: bool,
}

impl Repeats {
    /// Keeps values from one request to the next.
    pub fn kept() -> Self {
        Repeats {
            slots: Vec::with_capacity(SLOTS),
            next: 0,
            keeping: true,
        }
    }

    /// Keeps nothing: every value is made anew.
    pub fn none() -> Self {
        Repeats::default()
    }

    /// A new request starts at the first slot.
    pub fn start(&mut self) {
        self.next = 0;
    }

    /// `bytes` as a latin-1 str: the last request's str at this position
    /// when its bytes are the same, else a new one (kept for the next).
    pub fn str<'py>(&mut self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
        let i = self.next;
        if !self.keeping || i >= SLOTS {
            return latin1(py, bytes);
        }
        // A long value takes its place all the same, so that the values
        // after it meet theirs of the last request.
        self.next += 1;
        if bytes.len() > LONGEST {
            return latin1(py, bytes);
        }
        if let Some(Some(seen)) = self.slots.get(i) {
            let seen = seen.bind(py);
            if one_byte_storage(seen) == Some(Some(bytes)) {
                return Ok(seen.clone());
            }
        }
        let made = latin1(py, bytes)?;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(made.clone().unbind());
        Ok(made)
    }

    /// How many strs are held (for the tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.slots.iter().flatten().count()
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
            assert!(host.is(&host2));
            assert!(!agent.is(&other));
            assert_eq!(other.to_str().unwrap(), "curl/9");
            // What replaced a slot is what the next request finds there.
            r.start();
            r.str(py, b"example.com").unwrap();
            assert!(other.is(r.str(py, b"curl/9").unwrap()));
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
