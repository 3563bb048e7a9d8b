//! What an access line reads of its request, through one of two views: a
//! WSGI environ dict (`DictView`, the reference), or a request head parsed
//! natively (`HeadView` through `access_head`), which spares the asgi
//! worker an environ dict per line. Each says `Delegate` where the Python
//! getter must decide, and both give the same text for the same request.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::access_head::{environ_value as head_value, Lookup};
use super::environ::HeadView;
use crate::access_log::{escape_into, escape_latin1_into};

/// Why a value is not written natively: its Python getter decides.
pub(super) struct Delegate;

pub(super) type Native = Result<(), Delegate>;

/// The request atoms a view writes (`h m U q H f a {x}i`, `r`, `u`).
pub(super) trait RequestView {
    /// The environ value under `key` (`key_text` as a Python str), escaped;
    /// `default` when absent or empty.
    fn environ_value(
        &self,
        line: &mut String,
        key_text: &Bound<'_, PyString>,
        key: &str,
        default: &str,
    ) -> PyResult<Native>;
    /// `r`: "METHOD URI PROTOCOL".
    fn request_line(&self, line: &mut String) -> PyResult<Native>;
    /// `u` when no Basic credentials were sent.
    fn no_basic_user(&self, line: &mut String) -> PyResult<Native>;
}

/// A WSGI environ (an exact dict).
pub(super) struct DictView<'a, 'py>(pub &'a Bound<'py, PyDict>);

impl RequestView for DictView<'_, '_> {
    fn environ_value(
        &self,
        line: &mut String,
        key_text: &Bound<'_, PyString>,
        _key: &str,
        default: &str,
    ) -> PyResult<Native> {
        Ok(environ_value(
            line,
            self.0.get_item(key_text)?.as_ref(),
            default,
        ))
    }
    fn request_line(&self, line: &mut String) -> PyResult<Native> {
        request_line(line, self.0)
    }
    fn no_basic_user(&self, line: &mut String) -> PyResult<Native> {
        no_basic_user(line, self.0)
    }
}

/// A parsed head on a connection from `remote` (None: not UTF-8), read as
/// `wsgi_environ({"REMOTE_ADDR": remote})` would hold it.
pub(super) struct HeadSource<'a, H: HeadView> {
    pub head: &'a H,
    pub remote: Option<&'a str>,
}

impl<H: HeadView> HeadSource<'_, H> {
    fn lookup(&self, key: &str) -> Lookup<'_> {
        match self.remote {
            Some(remote) => head_value(self.head, remote, key),
            None if key == "REMOTE_ADDR" => Lookup::Unknown,
            None => head_value(self.head, "", key),
        }
    }
}

impl<H: HeadView> RequestView for HeadSource<'_, H> {
    fn environ_value(
        &self,
        line: &mut String,
        _key_text: &Bound<'_, PyString>,
        key: &str,
        default: &str,
    ) -> PyResult<Native> {
        Ok(match self.lookup(key) {
            Lookup::Found(value) if !value.is_empty() => {
                escape_latin1_into(line, &value);
                Ok(())
            }
            Lookup::Found(_) | Lookup::Absent => {
                line.push_str(default);
                Ok(())
            }
            Lookup::Unknown => Err(Delegate),
        })
    }

    fn request_line(&self, line: &mut String) -> PyResult<Native> {
        // RAW_URI is always there, so the path and query are never read.
        escape_latin1_into(line, self.head.method());
        line.push(' ');
        escape_latin1_into(line, self.head.target());
        line.push(' ');
        line.push_str(self.head.protocol());
        Ok(Ok(()))
    }

    fn no_basic_user(&self, line: &mut String) -> PyResult<Native> {
        Ok(match self.lookup("HTTP_AUTHORIZATION") {
            Lookup::Absent => {
                line.push('-');
                Ok(())
            }
            Lookup::Found(auth) => no_basic_scheme(line, &auth),
            Lookup::Unknown => Err(Delegate),
        })
    }
}

/// An environ string escaped, `default` when absent, None or empty.
fn environ_value(line: &mut String, value: Option<&Bound<'_, PyAny>>, default: &str) -> Native {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        line.push_str(default);
        return Ok(());
    };
    let text = exact_str(value)?;
    if text.is_empty() {
        line.push_str(default);
    } else {
        escape_into(line, text);
    }
    Ok(())
}

/// The text of an exact str; a subclass or a str with lone surrogates is the
/// getter's to format.
pub(super) fn exact_str<'a>(value: &'a Bound<'_, PyAny>) -> Result<&'a str, Delegate> {
    value
        .cast_exact::<PyString>()
        .ok()
        .and_then(|s| s.to_str().ok())
        .ok_or(Delegate)
}

/// `r`: "METHOD URI PROTOCOL", the URI the client sent (RAW_URI) or the path
/// and query; escaped as a whole.
fn request_line(line: &mut String, environ: &Bound<'_, PyDict>) -> PyResult<Native> {
    let py = environ.py();
    let method = environ.get_item(intern!(py, "REQUEST_METHOD"))?;
    let protocol = environ.get_item(intern!(py, "SERVER_PROTOCOL"))?;
    let raw_uri = environ
        .get_item(intern!(py, "RAW_URI"))?
        .filter(|v| !v.is_none());
    let (path, query) = match raw_uri {
        Some(_) => (None, None),
        None => (
            environ.get_item(intern!(py, "PATH_INFO"))?,
            environ.get_item(intern!(py, "QUERY_STRING"))?,
        ),
    };
    let parts = || -> Result<(&str, String, &str), Delegate> {
        let method = str_or(method.as_ref(), "-")?;
        let protocol = str_or(protocol.as_ref(), "-")?;
        let mut uri = match &raw_uri {
            Some(raw) => exact_str(raw)?.to_owned(),
            None => str_or(path.as_ref(), "")?.to_owned(),
        };
        if let Some(query) = query.as_ref().filter(|v| !v.is_none()) {
            let query = exact_str(query)?;
            if !query.is_empty() {
                uri.push('?');
                uri.push_str(query);
            }
        }
        Ok((method, uri, protocol))
    };
    let (method, uri, protocol) = match parts() {
        Ok(parts) => parts,
        Err(d) => return Ok(Err(d)),
    };
    escape_into(line, method);
    line.push(' ');
    escape_into(line, &uri);
    line.push(' ');
    escape_into(line, protocol);
    Ok(Ok(()))
}

/// An exact str's text, `absent` when there is no such key.
fn str_or<'a>(value: Option<&'a Bound<'_, PyAny>>, absent: &'a str) -> Result<&'a str, Delegate> {
    value.map_or(Ok(absent), exact_str)
}

/// `u` when no Basic credentials were sent: "-". Credentials are decoded by
/// the getter (base64 and latin-1 as Python's).
fn no_basic_user(line: &mut String, environ: &Bound<'_, PyDict>) -> PyResult<Native> {
    let auth = environ.get_item(intern!(environ.py(), "HTTP_AUTHORIZATION"))?;
    let Some(auth) = auth.filter(|v| !v.is_none()) else {
        line.push('-');
        return Ok(Ok(()));
    };
    let Ok(auth) = exact_str(&auth) else {
        return Ok(Err(Delegate));
    };
    Ok(no_basic_scheme(line, auth.as_bytes()))
}

/// "-" for credentials that are not Basic (the text or its latin-1 bytes:
/// either way a non-ASCII scheme is Python's to compare).
fn no_basic_scheme(line: &mut String, auth: &[u8]) -> Native {
    let scheme = auth.split(|&b| b == b' ').next().unwrap_or(b"");
    if auth.is_empty() || (scheme.is_ascii() && !scheme.eq_ignore_ascii_case(b"basic")) {
        line.push('-');
        return Ok(());
    }
    Err(Delegate)
}
