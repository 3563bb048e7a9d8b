//! The ASGI scope's request keys, one builder for every server: the asgi
//! worker fills them from the `http1_codec` head it parsed (`Request.asgi_scope`), the
//! native engine from hyper's head (`asgi::cycle`). Both read the head through
//! `HeadView`, as the WSGI environ builder does, so path decoding, root_path
//! and the header list follow one set of rules.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use super::environ::{method_str, HeadView};
use super::repeats::Kept;
use super::text::{one_byte_storage, READS_STORAGE};

/// What a connection's last scope held, for its next (py/repeats.rs): the
/// path, raw_path and query_string, and the header pairs by position.
#[derive(Default)]
pub struct ScopeRepeats {
    path: Kept<PyString>,
    bytes: Kept<PyBytes>,
    pairs: Kept<PyTuple>,
}

impl ScopeRepeats {
    pub fn kept() -> Self {
        ScopeRepeats {
            // A path is compared through the str's storage.
            path: Kept::keeping_if(READS_STORAGE),
            bytes: Kept::keeping(),
            pairs: Kept::keeping(),
        }
    }

    pub fn none() -> Self {
        ScopeRepeats::default()
    }

    /// The decoded path as a str. Only an ASCII path is matched: then a
    /// one-byte str holding the same bytes is the same text.
    fn path<'py>(&mut self, py: Python<'py>, decoded: &[u8]) -> PyResult<Bound<'py, PyString>> {
        self.path.reuse(
            py,
            decoded.len(),
            |seen| decoded.is_ascii() && one_byte_storage(seen) == Some(Some(decoded)),
            || Ok(PyString::new(py, &String::from_utf8_lossy(decoded))),
        )
    }

    fn bytes<'py>(&mut self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        self.bytes.reuse(
            py,
            bytes.len(),
            |seen| seen.as_bytes() == bytes,
            || Ok(PyBytes::new(py, bytes)),
        )
    }

    fn pair<'py>(
        &mut self,
        py: Python<'py>,
        name: &[u8],
        value: &[u8],
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.pairs.reuse(
            py,
            name.len() + value.len(),
            |seen| same_pair(seen, name, value),
            || pair(py, name, value),
        )
    }
}

/// Whether a pair this module made holds `name` and `value`.
fn same_pair(seen: &Bound<'_, PyTuple>, name: &[u8], value: &[u8]) -> bool {
    let holds = |i: usize, want: &[u8]| {
        seen.get_borrowed_item(i)
            .is_ok_and(|item| item.cast::<PyBytes>().is_ok_and(|b| b.as_bytes() == want))
    };
    holds(0, name) && holds(1, value)
}

/// Adds what the request defines to `scope` (which holds the connection's
/// keys already): http_version, method (HTTP scopes only), path with
/// `root_path` before it, raw_path, query_string and, unless the caller has
/// its own list, headers; each value from `repeats` where the connection's
/// last request had the same.
pub fn fill(
    scope: &Bound<'_, PyDict>,
    head: &impl HeadView,
    root_path: &str,
    with_method: bool,
    headers: Option<Bound<'_, PyList>>,
    repeats: &mut ScopeRepeats,
) -> PyResult<()> {
    let py = scope.py();
    repeats.path.start();
    repeats.bytes.start();
    scope.set_item(
        intern!(py, "http_version"),
        version_str(py, head.protocol()),
    )?;
    if with_method {
        scope.set_item(intern!(py, "method"), method_str(py, head.method())?)?;
    }
    // The decoded path as UTF-8 (ASGI's `path` is text); a client's invalid
    // sequences become U+FFFD rather than an error.
    if root_path.is_empty() {
        scope.set_item(intern!(py, "path"), repeats.path(py, head.path())?)?;
        scope.set_item(intern!(py, "raw_path"), repeats.bytes(py, head.raw_path())?)?;
    } else {
        let decoded = String::from_utf8_lossy(head.path());
        scope.set_item(intern!(py, "path"), format!("{root_path}{decoded}"))?;
        let mut raw = Vec::with_capacity(root_path.len() + head.raw_path().len());
        raw.extend_from_slice(root_path.as_bytes());
        raw.extend_from_slice(head.raw_path());
        scope.set_item(intern!(py, "raw_path"), PyBytes::new(py, &raw))?;
    }
    scope.set_item(
        intern!(py, "query_string"),
        repeats.bytes(py, head.query())?,
    )?;
    let headers = match headers {
        Some(list) => list,
        None => header_list(py, head, repeats)?,
    };
    scope.set_item(intern!(py, "headers"), headers)?;
    Ok(())
}

/// `[(name, value), ...]` as received, names lower-case. An HTTP/2 request
/// without a Host field gets one from `:authority` first, so that apps find
/// the host where HTTP/1.1 puts it (RFC 9113 8.3.1).
pub fn header_list<'py>(
    py: Python<'py>,
    head: &impl HeadView,
    repeats: &mut ScopeRepeats,
) -> PyResult<Bound<'py, PyList>> {
    repeats.pairs.start();
    let n = head.field_count();
    let list = PyList::empty(py);
    if let Some(host) = head.host_override() {
        if !(0..n).any(|i| head.field(i).0 == b"host") {
            list.append(repeats.pair(py, b"host", host)?)?;
        }
    }
    for i in 0..n {
        let (name, value) = head.field(i);
        list.append(repeats.pair(py, name, value)?)?;
    }
    Ok(list)
}

fn pair<'py>(py: Python<'py>, name: &[u8], value: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, [PyBytes::new(py, name), PyBytes::new(py, value)])
}

fn version_str<'py>(py: Python<'py>, protocol: &'static str) -> Bound<'py, PyString> {
    match protocol {
        "HTTP/1.0" => intern!(py, "1.0").clone(),
        "HTTP/2" => intern!(py, "2").clone(),
        "HTTP/3" => intern!(py, "3").clone(),
        _ => intern!(py, "1.1").clone(),
    }
}

/// "addr:port" (or "[v6]:port") as ASGI's `(host, port)`; None for "" (a unix
/// socket) or anything else without a port.
pub fn address<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    match host_and_port(text) {
        Some(address) => Ok(address.into_pyobject(py)?.into_any()),
        None => Ok(py.None().into_bound(py)),
    }
}

/// The host and port of "addr:port" or "[v6]:port" (the brackets dropped).
pub fn host_and_port(text: &str) -> Option<(&str, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host, port))
}
