//! The WSGI environ's request keys, one builder for every server: the Python
//! workers fill it from the `http1_codec` head they parsed, the native engine from
//! hyper's head (`wsgi::head`). Both go through `HeadView`, so PATH_INFO,
//! SCRIPT_NAME, repeated fields and the HTTP_* names follow one set of rules.

use std::collections::BTreeMap;
use std::sync::Mutex;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::repeats::Repeats;
use super::text::{latin1, latin1_bytes};
use crate::http1_codec::{RequestHead, Version};

/// What the environ builder reads from a request head.
pub trait HeadView {
    fn method(&self) -> &[u8];
    /// The request-target as received (RAW_URI).
    fn target(&self) -> &[u8];
    /// The percent-decoded path, SCRIPT_NAME not yet removed.
    fn path(&self) -> &[u8];
    /// The path as received, undecoded (ASGI's raw_path).
    fn raw_path(&self) -> &[u8];
    fn query(&self) -> &[u8];
    /// SERVER_PROTOCOL.
    fn protocol(&self) -> &'static str;
    fn field_count(&self) -> usize;
    /// Field `i`: the name lower-case, in the order received.
    fn field(&self, i: usize) -> (&[u8], &[u8]);
    /// A host that wins over the Host field (an absolute-form target).
    fn host_override(&self) -> Option<&[u8]>;
}

impl HeadView for RequestHead {
    fn method(&self) -> &[u8] {
        RequestHead::method(self)
    }
    fn target(&self) -> &[u8] {
        RequestHead::target(self)
    }
    fn path(&self) -> &[u8] {
        RequestHead::path(self)
    }
    fn raw_path(&self) -> &[u8] {
        RequestHead::raw_path(self)
    }
    fn query(&self) -> &[u8] {
        RequestHead::query(self)
    }
    fn protocol(&self) -> &'static str {
        match self.version {
            Version::Http11 => "HTTP/1.1",
            Version::Http10 => "HTTP/1.0",
        }
    }
    fn field_count(&self) -> usize {
        RequestHead::field_count(self)
    }
    fn field(&self, i: usize) -> (&[u8], &[u8]) {
        RequestHead::field(self, i)
    }
    fn host_override(&self) -> Option<&[u8]> {
        if self.host_from_target() {
            self.host()
        } else {
            None
        }
    }
}

pub fn method_str<'py>(py: Python<'py>, m: &[u8]) -> PyResult<Bound<'py, PyString>> {
    Ok(match m {
        b"GET" => intern!(py, "GET").clone(),
        b"POST" => intern!(py, "POST").clone(),
        b"HEAD" => intern!(py, "HEAD").clone(),
        b"PUT" => intern!(py, "PUT").clone(),
        b"DELETE" => intern!(py, "DELETE").clone(),
        b"OPTIONS" => intern!(py, "OPTIONS").clone(),
        b"PATCH" => intern!(py, "PATCH").clone(),
        _ => latin1(py, m)?,
    })
}

fn protocol_str<'py>(py: Python<'py>, protocol: &'static str) -> Bound<'py, PyString> {
    match protocol {
        "HTTP/1.1" => intern!(py, "HTTP/1.1").clone(),
        "HTTP/1.0" => intern!(py, "HTTP/1.0").clone(),
        "HTTP/2" => intern!(py, "HTTP/2").clone(),
        other => PyString::new(py, other),
    }
}

/// The environ key for a lower-case field name; `None` for names with "_",
/// which Gunicorn drops too: "X_Forwarded_For" must not pose as
/// HTTP_X_FORWARDED_FOR behind a proxy that only strips the dashed form.
fn http_key<'py>(py: Python<'py>, name: &[u8]) -> Option<Bound<'py, PyString>> {
    macro_rules! known {
        ($($name:literal => $key:literal,)*) => {
            match name {
                $($name => return Some(intern!(py, $key).clone()),)*
                _ => {}
            }
        };
    }
    known! {
        b"host" => "HTTP_HOST",
        b"user-agent" => "HTTP_USER_AGENT",
        b"accept" => "HTTP_ACCEPT",
        b"accept-encoding" => "HTTP_ACCEPT_ENCODING",
        b"accept-language" => "HTTP_ACCEPT_LANGUAGE",
        b"connection" => "HTTP_CONNECTION",
        b"cookie" => "HTTP_COOKIE",
        b"referer" => "HTTP_REFERER",
        b"origin" => "HTTP_ORIGIN",
        b"cache-control" => "HTTP_CACHE_CONTROL",
        b"pragma" => "HTTP_PRAGMA",
        b"authorization" => "HTTP_AUTHORIZATION",
        b"if-none-match" => "HTTP_IF_NONE_MATCH",
        b"if-modified-since" => "HTTP_IF_MODIFIED_SINCE",
        b"x-forwarded-for" => "HTTP_X_FORWARDED_FOR",
        b"x-forwarded-proto" => "HTTP_X_FORWARDED_PROTO",
        b"x-forwarded-host" => "HTTP_X_FORWARDED_HOST",
        b"x-real-ip" => "HTTP_X_REAL_IP",
        b"x-request-id" => "HTTP_X_REQUEST_ID",
        b"transfer-encoding" => "HTTP_TRANSFER_ENCODING",
        b"expect" => "HTTP_EXPECT",
        b"upgrade" => "HTTP_UPGRADE",
        b"upgrade-insecure-requests" => "HTTP_UPGRADE_INSECURE_REQUESTS",
        b"sec-fetch-dest" => "HTTP_SEC_FETCH_DEST",
        b"sec-fetch-mode" => "HTTP_SEC_FETCH_MODE",
        b"sec-fetch-site" => "HTTP_SEC_FETCH_SITE",
        b"sec-fetch-user" => "HTTP_SEC_FETCH_USER",
        b"dnt" => "HTTP_DNT",
    }
    if name.contains(&b'_') {
        return None;
    }
    let mut cache = KEY_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(key) = cache.get(name) {
        return Some(key.bind(py).clone());
    }
    let mut key = String::with_capacity(5 + name.len());
    key.push_str("HTTP_");
    key.extend(name.iter().map(|&b| match b {
        b'-' => '_',
        _ => b.to_ascii_uppercase() as char,
    }));
    if cache.len() >= KEY_CACHE_SIZE {
        // Not interned: interned strings may never be freed (3.12).
        return Some(PyString::new(py, &key));
    }
    let key = PyString::intern(py, &key);
    cache.insert(name.into(), key.clone().unbind());
    Some(key)
}

/// Keys of custom fields an app's clients send again and again (X-Request-Id,
/// X-Amzn-Trace-Id...): built once, then found by name. Bounded, so a client
/// inventing names cannot grow it; past the bound keys are built each time.
const KEY_CACHE_SIZE: usize = 512;
static KEY_CACHE: Mutex<BTreeMap<Box<[u8]>, Py<PyString>>> = Mutex::new(BTreeMap::new());

/// `env[key] = value` without pyo3's generic conversions (this runs ~20 times
/// per request).
#[inline]
pub fn put(
    env: &Bound<'_, PyDict>,
    key: &Bound<'_, PyString>,
    value: &Bound<'_, PyString>,
) -> PyResult<()> {
    // SAFETY: three valid borrowed references; PyDict_SetItem increments
    // what it stores and returns -1 with an exception set on failure.
    let rc = unsafe { pyo3::ffi::PyDict_SetItem(env.as_ptr(), key.as_ptr(), value.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(env.py()))
    }
}

/// Adds the request's own keys to `env` (a copy of the listener's base, which
/// holds SCRIPT_NAME): REQUEST_METHOD, PATH_INFO, QUERY_STRING, RAW_URI,
/// REQUEST_URI, SERVER_PROTOCOL, CONTENT_TYPE, CONTENT_LENGTH and HTTP_*.
/// Their values come from `repeats` (the connection's last request's, where
/// the bytes are the same).
pub fn fill(env: &Bound<'_, PyDict>, head: &impl HeadView, repeats: &mut Repeats) -> PyResult<()> {
    let py = env.py();
    repeats.start();
    put(
        env,
        intern!(py, "REQUEST_METHOD"),
        &method_str(py, head.method())?,
    )?;

    let mut path = head.path();
    if let Some(script) = env.get_item(intern!(py, "SCRIPT_NAME"))? {
        if let Ok(script) = script.cast::<PyString>() {
            let script = latin1_bytes(script, "SCRIPT_NAME")?;
            let script = script.strip_suffix(b"/").unwrap_or(&script);
            // Only at a segment boundary: "/app" mounts "/app/x", not "/apple".
            if !script.is_empty()
                && path.starts_with(script)
                && matches!(path.get(script.len()), None | Some(b'/'))
            {
                path = &path[script.len()..];
            }
        }
    }
    let raw_uri = repeats.str(py, head.target())?;
    // Without a query, an escape or a mount, the path is the target: one str.
    let path_info = if path == head.target() {
        raw_uri.clone()
    } else {
        repeats.str(py, path)?
    };
    put(env, intern!(py, "PATH_INFO"), &path_info)?;
    put(env, intern!(py, "QUERY_STRING"), &latin1(py, head.query())?)?;
    put(env, intern!(py, "RAW_URI"), &raw_uri)?;
    put(env, intern!(py, "REQUEST_URI"), &raw_uri)?;
    put(
        env,
        intern!(py, "SERVER_PROTOCOL"),
        &protocol_str(py, head.protocol()),
    )?;

    let n = head.field_count();
    for i in 0..n {
        let (name, value) = head.field(i);
        match name {
            b"content-type" => {
                put(env, intern!(py, "CONTENT_TYPE"), &repeats.str(py, value)?)?;
                continue;
            }
            b"content-length" => {
                put(env, intern!(py, "CONTENT_LENGTH"), &repeats.str(py, value)?)?;
                continue;
            }
            _ => {}
        }
        // A repeated field was joined when its first line came by.
        if (0..i).any(|j| head.field(j).0 == name) {
            continue;
        }
        let Some(key) = http_key(py, name) else {
            continue;
        };
        let repeats_of = (i + 1..n).filter(|&j| head.field(j).0 == name);
        let mut joined: Option<Vec<u8>> = None;
        for j in repeats_of {
            let buf = joined.get_or_insert_with(|| value.to_vec());
            buf.push(b',');
            buf.extend_from_slice(head.field(j).1);
        }
        let value = repeats.str(py, joined.as_deref().unwrap_or(value))?;
        put(env, &key, &value)?;
    }
    if let Some(host) = head.host_override() {
        put(env, intern!(py, "HTTP_HOST"), &latin1(py, host)?)?;
    }
    Ok(())
}
