//! `AccessFormat`: one text access line per call, for `supervise/logs.py`.
//!
//! A placeholder's value is read here when it is one of the common atoms and
//! its value has the plain type the servers give (an exact str in a dict
//! environ, an exact int status or size, a float request time). Anything
//! else (a spec other than `s`, an unknown atom, a str subclass, a non-dict
//! mapping, Basic credentials to decode) goes to the placeholder's Python
//! getter, the reference: the line is the same either way, and the common
//! line costs no Python frame.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::access_view::{exact_str, Delegate, DictView, HeadSource, Native, RequestView};
use super::asgi_scope::host_and_port;
use super::environ::{self, HeadView};
use super::repeats::Repeats;
use super::request::Request;
use crate::access_log::{atom, duration_units, escape_into, Atom};

/// One placeholder and the literal text before it.
struct Piece {
    literal: String,
    atom: Atom,
    /// The environ key of an `Atom::Environ`, made once (its hash is cached).
    key: Option<Py<PyString>>,
    /// `"%<spec>"` when the spec is not plain `s`: Python formats the value.
    template: Option<Py<PyString>>,
    getter: Py<PyAny>,
}

#[pyclass(module = "supervise._native", frozen)]
pub struct AccessFormat {
    pieces: Vec<Piece>,
    tail: String,
    /// `time_text(second) -> str`, called once a second at most.
    time_text: Py<PyAny>,
    time_cache: Mutex<(u64, String)>,
    /// A `{name}o` is in the format: the server keeps the response's fields
    /// for the line only then.
    reads_response_fields: bool,
}

/// The response an access line reads.
pub enum Resp<'a, 'py> {
    /// A Python object read by attribute (`status_code`, `sent`, `headers`),
    /// as the getters read it.
    Object(&'a Bound<'py, PyAny>),
    /// What the server knows of it, and the `make_response(status, sent,
    /// headers)` that builds the object a getter is given, only then.
    Known(&'a KnownResponse<'py>, &'a Bound<'py, PyAny>),
}

/// The response as the native server knows it.
pub struct KnownResponse<'py> {
    /// 0: none was sent.
    pub status: u16,
    /// The body bytes handed over; None: unknown.
    pub sent: Option<u64>,
    /// The app's header pairs, for `{name}o`.
    pub headers: Option<Bound<'py, PyAny>>,
}

impl<'py> Resp<'_, 'py> {
    fn object(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Resp::Object(object) => Ok((*object).clone()),
            Resp::Known(known, make) => {
                let headers = known
                    .headers
                    .clone()
                    .unwrap_or_else(|| py.None().into_bound(py));
                make.call1((known.status, known.sent, headers))
            }
        }
    }
}

/// The access log as the native server writes it itself: each line made by
/// `format` and handed to `emit(line)` (`Logger._emit`), a failure to
/// `failed(exc)`; no Python frame of the worker's per line otherwise.
#[pyclass(module = "supervise._native", frozen)]
pub struct AccessLog {
    format: Py<AccessFormat>,
    emit: Py<PyAny>,
    failed: Py<PyAny>,
    make_response: Py<PyAny>,
}

#[pymethods]
impl AccessLog {
    #[new]
    #[pyo3(signature = (*, format, emit, failed, make_response))]
    fn new(
        format: Py<AccessFormat>,
        emit: Py<PyAny>,
        failed: Py<PyAny>,
        make_response: Py<PyAny>,
    ) -> Self {
        AccessLog {
            format,
            emit,
            failed,
            make_response,
        }
    }
}

impl AccessLog {
    /// Whether a line reads the response's fields (`KnownResponse::headers`).
    pub fn reads_response_fields(&self) -> bool {
        self.format.get().reads_response_fields
    }

    /// Logs `head`, answered with `resp`, from the client `client` ("addr:
    /// port") after `seconds`. Never raises: the request is over either way.
    pub fn log(
        &self,
        py: Python<'_>,
        resp: &KnownResponse<'_>,
        head: &impl HeadView,
        client: &str,
        seconds: f64,
    ) {
        let make = self.make_response.bind(py);
        let result = (|| -> PyResult<()> {
            let remote = remote_addr(py, client);
            let rt = PyFloat::new(py, seconds);
            let line = self.format.get().line_for_head(
                Resp::Known(resp, make),
                head,
                &remote,
                rt.as_any(),
            )?;
            self.emit.call1(py, (line,))?;
            Ok(())
        })();
        if let Err(err) = result {
            let failed = self.failed.bind(py);
            if let Err(err) = failed.call1((err.into_value(py),)) {
                err.write_unraisable(py, Some(failed));
            }
        }
    }
}

#[pymethods]
impl AccessFormat {
    /// `pieces`: `(literal, key, spec, getter)` for each placeholder, with
    /// `getter(resp, environ, rt)` Python's value of it; `tail`: the text
    /// after the last one.
    #[new]
    fn new(
        py: Python<'_>,
        pieces: Vec<(String, String, String, Py<PyAny>)>,
        tail: String,
        time_text: Py<PyAny>,
    ) -> Self {
        let reads_response_fields = pieces.iter().any(|(_, key, _, _)| {
            key.starts_with('{') && (key.ends_with("}o") || key.ends_with("}O"))
        });
        let pieces = pieces
            .into_iter()
            .map(|(literal, key, spec, getter)| {
                let atom = atom(&key);
                let key = match &atom {
                    Atom::Environ { key, .. } => Some(PyString::new(py, key).unbind()),
                    _ => None,
                };
                let template =
                    (spec != "s").then(|| PyString::new(py, &format!("%{spec}")).unbind());
                Piece {
                    literal,
                    atom,
                    key,
                    template,
                    getter,
                }
            })
            .collect();
        AccessFormat {
            pieces,
            tail,
            time_text,
            time_cache: Mutex::new((u64::MAX, String::new())),
            reads_response_fields,
        }
    }

    /// The line for this response, request environ and request time.
    fn __call__<'py>(
        &self,
        resp: &Bound<'py, PyAny>,
        environ: &Bound<'py, PyAny>,
        rt: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyString>> {
        let dict = environ.cast_exact::<PyDict>().ok().map(DictView);
        let view = dict.as_ref().map(|d| d as &dyn RequestView);
        self.line(Resp::Object(resp), rt, view, &mut || Ok(environ.clone()))
    }

    /// The line `self(resp, request.wsgi_environ({"REMOTE_ADDR": remote}),
    /// rt)` gives, read from the parsed head: the environ dict is built only
    /// for what the head alone does not say.
    fn for_request<'py>(
        &self,
        resp: &Bound<'py, PyAny>,
        request: &Bound<'py, Request>,
        remote: &Bound<'py, PyString>,
        rt: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyString>> {
        self.line_for_head(Resp::Object(resp), request.get().head(), remote, rt)
    }
}

impl AccessFormat {
    /// The line for `head` on a connection from `remote`, as `self` gives it
    /// for the environ `environ::fill` makes of them: what a server that
    /// parsed the head natively logs without building that dict.
    pub fn line_for_head<'py>(
        &self,
        resp: Resp<'_, 'py>,
        head: &impl HeadView,
        remote: &Bound<'py, PyString>,
        rt: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyString>> {
        let view = HeadSource {
            head,
            // Not UTF-8 (a lone surrogate): the built environ's to read.
            remote: remote.to_str().ok(),
        };
        let mut built: Option<Bound<'py, PyAny>> = None;
        let mut environ = || -> PyResult<Bound<'py, PyAny>> {
            if let Some(env) = &built {
                return Ok(env.clone());
            }
            let env = head_environ(head, remote)?;
            Ok(built.insert(env.into_any()).clone())
        };
        self.line(resp, rt, Some(&view), &mut environ)
    }

    /// The line, each placeholder read through `view` where it can be and
    /// otherwise by its getter, called with `environ()`; with no view every
    /// placeholder is its getter's.
    fn line<'py>(
        &self,
        resp: Resp<'_, 'py>,
        rt: &Bound<'py, PyAny>,
        view: Option<&dyn RequestView>,
        environ: &mut dyn FnMut() -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyString>> {
        let py = rt.py();
        let mut line = String::with_capacity(256);
        let mut made: Option<Bound<'py, PyAny>> = None;
        for piece in &self.pieces {
            line.push_str(&piece.literal);
            let native = match (view, &piece.template) {
                (Some(view), None) => self.write_atom(&mut line, piece, &resp, view, rt)?,
                _ => Err(Delegate),
            };
            if native.is_err() {
                let resp = match &made {
                    Some(object) => object.clone(),
                    None => made.insert(resp.object(py)?).clone(),
                };
                let value = piece.getter.bind(py).call1((resp, environ()?, rt))?;
                let text = match &piece.template {
                    None => value.str()?,
                    Some(template) => template
                        .bind(py)
                        .rem(PyTuple::new(py, [value])?)?
                        .cast_into()?,
                };
                // A lone surrogate (os.environ's undecodable bytes) cannot be
                // written as UTF-8 by any handler: it becomes U+FFFD here.
                line.push_str(&text.to_string_lossy());
            }
        }
        line.push_str(&self.tail);
        Ok(PyString::new(py, &line))
    }

    /// Writes the atom's value, or says its getter must; nothing is written
    /// before a `Delegate`.
    fn write_atom(
        &self,
        line: &mut String,
        piece: &Piece,
        resp: &Resp<'_, '_>,
        view: &dyn RequestView,
        rt: &Bound<'_, PyAny>,
    ) -> PyResult<Native> {
        let py = rt.py();
        Ok(match &piece.atom {
            Atom::Environ { key, default } => {
                let key_text = piece
                    .key
                    .as_ref()
                    .expect("an environ atom has its key")
                    .bind(py);
                view.environ_value(line, key_text, key, default)?
            }
            Atom::Dash => {
                line.push('-');
                Ok(())
            }
            Atom::RequestLine => view.request_line(line)?,
            Atom::Status => match resp {
                Resp::Object(resp) => match resp.getattr_opt(intern!(py, "status_code"))? {
                    Some(code) => write_int(line, &code),
                    None => Err(Delegate),
                },
                // None sent: the getter prints what the record says.
                Resp::Known(known, _) if known.status == 0 => Err(Delegate),
                Resp::Known(known, _) => {
                    let _ = write!(line, "{}", known.status);
                    Ok(())
                }
            },
            Atom::SentOrZero | Atom::SentOrDash => {
                let unknown = if piece.atom == Atom::SentOrZero {
                    '0'
                } else {
                    '-'
                };
                match resp {
                    // No attribute reads as None, as getattr(resp, "sent", None).
                    Resp::Object(resp) => match resp.getattr_opt(intern!(py, "sent"))? {
                        Some(sent) if !sent.is_none() => write_int(line, &sent),
                        _ => {
                            line.push(unknown);
                            Ok(())
                        }
                    },
                    Resp::Known(known, _) => {
                        match known.sent {
                            Some(sent) => {
                                let _ = write!(line, "{sent}");
                            }
                            None => line.push(unknown),
                        }
                        Ok(())
                    }
                }
            }
            Atom::Duration { per_second } => match rt.cast_exact::<PyFloat>() {
                Ok(rt) => match duration_units(rt.value(), *per_second) {
                    Some(units) => {
                        let _ = write!(line, "{units}");
                        Ok(())
                    }
                    None => Err(Delegate),
                },
                Err(_) => Err(Delegate),
            },
            Atom::Pid => {
                let _ = write!(line, "<{}>", std::process::id());
                Ok(())
            }
            Atom::ResponseHeader { name } => {
                let headers = match resp {
                    Resp::Object(resp) => resp.getattr_opt(intern!(py, "headers"))?,
                    Resp::Known(known, _) => known.headers.clone(),
                };
                response_header(line, headers, name)?
            }
            Atom::Time => {
                self.write_time(line, py)?;
                Ok(())
            }
            Atom::User => view.no_basic_user(line)?,
            Atom::Python => Err(Delegate),
        })
    }

    /// `[day/month/year:h:m:s zone]` of this second, cached for the second.
    fn write_time(&self, line: &mut String, py: Python<'_>) -> PyResult<()> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        {
            let cached = self.time_cache.lock().unwrap_or_else(|e| e.into_inner());
            if cached.0 == now {
                line.push_str(&cached.1);
                return Ok(());
            }
        }
        // The lock is not held across the call: it may release the GIL.
        let text: String = self.time_text.bind(py).call1((now,))?.extract()?;
        line.push_str(&text);
        *self.time_cache.lock().unwrap_or_else(|e| e.into_inner()) = (now, text);
        Ok(())
    }
}

/// The environ an access line reads for `head` on a connection from `remote`:
/// `environ::fill`'s keys and REMOTE_ADDR.
pub fn head_environ<'py>(
    head: &impl HeadView,
    remote: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyDict>> {
    let env = PyDict::new(remote.py());
    environ::put(&env, intern!(remote.py(), "REMOTE_ADDR"), remote)?;
    environ::fill(&env, head, &mut Repeats::none())?;
    Ok(env)
}

/// REMOTE_ADDR for a client's "addr:port" text (the native server's
/// `ConnInfo::client`): its host, brackets dropped; "" for a unix socket.
pub fn remote_addr<'py>(py: Python<'py>, client: &str) -> Bound<'py, PyString> {
    let host = host_and_port(client).map_or("", |(host, _)| host);
    PyString::new(py, host)
}

/// An exact int (never a bool) as decimal.
fn write_int(line: &mut String, value: &Bound<'_, PyAny>) -> Native {
    let value = value.cast_exact::<PyInt>().map_err(|_| Delegate)?;
    let value: i64 = value.extract().map_err(|_| Delegate)?;
    let _ = write!(line, "{value}");
    Ok(())
}

/// `{name}o`: the last header of that name; a header name that is not ASCII
/// goes to the getter, since Python compares Unicode lower case.
fn response_header(
    line: &mut String,
    headers: Option<Bound<'_, PyAny>>,
    name: &str,
) -> PyResult<Native> {
    let Some(headers) = headers.filter(|h| !h.is_none()) else {
        line.push('-');
        return Ok(Ok(()));
    };
    let items = if let Ok(list) = headers.cast_exact::<PyList>() {
        list.iter().collect::<Vec<_>>()
    } else if let Ok(tuple) = headers.cast_exact::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Ok(Err(Delegate));
    };
    let mut found = None;
    for item in &items {
        let Ok(pair) = item.cast_exact::<PyTuple>() else {
            return Ok(Err(Delegate));
        };
        if pair.len() != 2 {
            return Ok(Err(Delegate));
        }
        let key = pair.get_borrowed_item(0)?;
        let Ok(key) = exact_str(&key) else {
            return Ok(Err(Delegate));
        };
        if !key.is_ascii() {
            return Ok(Err(Delegate));
        }
        if key.eq_ignore_ascii_case(name) {
            found = Some(pair.get_item(1)?);
        }
    }
    match found.filter(|v| v.is_truthy().unwrap_or(true)) {
        None => line.push('-'),
        Some(value) => match exact_str(&value) {
            Ok(value) => escape_into(line, value),
            Err(d) => return Ok(Err(d)),
        },
    }
    Ok(Ok(()))
}
