//! An ASGI `send` message's keys, read in one pass over its dict.
//!
//! A response is two messages, and reading one key at a time cost seven
//! dict lookups a request (type, status, headers, trailers; type, body,
//! more_body), each about 130 instructions, the misses (trailers, more_body,
//! which most apps leave out) as dear as the hits. A message dict holds two
//! to four entries, so walking them once and matching each key against the
//! names ASGI defines is cheaper: a key written as a literal in the app is
//! the interned str these names are, and matches by address; any other str
//! is compared by its text, so a key made at run time (decoded JSON, a
//! join) is found as a lookup would find it.
//!
//! A message that is not a dict (a mapping of the app's own) is read with
//! `__getitem__` per key as before, and only the keys asked for.

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

/// The keys of the ASGI HTTP messages an app sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Type,
    Status,
    Headers,
    Trailers,
    Body,
    MoreBody,
    Path,
    MoreTrailers,
    Links,
}

const NAMES: [&str; 9] = [
    "type",
    "status",
    "headers",
    "trailers",
    "body",
    "more_body",
    "path",
    "more_trailers",
    "links",
];

impl Key {
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }
}

/// The interned names, made once: a literal key in the app is the same object.
fn interned(py: Python<'_>) -> &[Py<PyString>; 9] {
    static NAMES_INTERNED: PyOnceLock<[Py<PyString>; 9]> = PyOnceLock::new();
    NAMES_INTERNED.get_or_init(py, || NAMES.map(|name| PyString::intern(py, name).unbind()))
}

/// One message, ready to be asked for its keys.
pub enum MessageKeys<'py> {
    /// A dict's values by `Key`, found in one pass.
    Read([Option<Bound<'py, PyAny>>; 9]),
    /// Anything else: asked per key.
    Mapping(Bound<'py, PyAny>),
}

impl<'py> MessageKeys<'py> {
    pub fn of(message: &Bound<'py, PyAny>) -> Self {
        match message.cast::<PyDict>() {
            Ok(dict) => Self::of_dict(dict),
            Err(_) => MessageKeys::Mapping(message.clone()),
        }
    }

    /// A dict's keys: its own entries, as `PyDict_GetItem` would see them
    /// (a subclass's `__getitem__` is not asked, as before).
    pub fn of_dict(dict: &Bound<'py, PyDict>) -> Self {
        let names = interned(dict.py());
        let mut found: [Option<Bound<'py, PyAny>>; 9] = Default::default();
        for (key, value) in dict.iter() {
            if let Some(at) = slot_of(names, &key) {
                found[at] = Some(value);
            }
        }
        MessageKeys::Read(found)
    }

    /// The value of `key`, None when the message has none.
    pub fn get(&self, key: Key) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self {
            MessageKeys::Read(found) => Ok(found[key as usize].clone()),
            MessageKeys::Mapping(message) => {
                let name = &interned(message.py())[key as usize];
                match message.get_item(name.bind(message.py())) {
                    Ok(value) => Ok(Some(value)),
                    Err(e) if e.is_instance_of::<PyKeyError>(message.py()) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// The value of `key`; a KeyError naming it when there is none.
    pub fn required(&self, key: Key) -> PyResult<Bound<'py, PyAny>> {
        self.get(key)?
            .ok_or_else(|| PyKeyError::new_err(key.name()))
    }

    /// A boolean key (`more_body`, `trailers`): False when absent.
    pub fn flag(&self, key: Key) -> PyResult<bool> {
        self.get(key)?.map_or(Ok(false), |value| value.is_truthy())
    }
}

/// Which of the names `key` is: by address first (an interned literal),
/// then by text for any other str.
fn slot_of(names: &[Py<PyString>; 9], key: &Bound<'_, PyAny>) -> Option<usize> {
    if let Some(at) = names.iter().position(|name| name.as_ptr() == key.as_ptr()) {
        return Some(at);
    }
    let text = key.cast::<PyString>().ok()?.to_str().ok()?;
    NAMES.iter().position(|name| *name == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Key; 9] = [
        Key::Type,
        Key::Status,
        Key::Headers,
        Key::Trailers,
        Key::Body,
        Key::MoreBody,
        Key::Path,
        Key::MoreTrailers,
        Key::Links,
    ];

    #[test]
    fn names_and_keys_agree() {
        for (at, key) in ALL.iter().enumerate() {
            assert_eq!(*key as usize, at);
            assert_eq!(key.name(), NAMES[at]);
        }
    }
}
