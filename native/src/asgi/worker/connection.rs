//! `AsgiHttpConnection`: one HTTP/1.1 connection of the asgi worker, the
//! base class of `HttpProtocol` (`supervise/http/asgi_http.py`), and
//! `AsgiHttpShared`, what all of one worker's connections read per request.
//!
//! What runs for every request is here: taking the client's bytes
//! (`data_received`), parsing the next head, building the scope, making the
//! request's cycle and starting its Task, and the response's end
//! (`response_complete`: close, or go on to the next request). What is rare
//! or waits stays in the subclass: a connection queued for a slot, the
//! screening before the app (probes, static files, limits), the WebSocket
//! upgrade, proxy headers that name a client, refusals with their log line,
//! the write-side flow control and the sweep.
//!
//! Re-entrancy: on Python 3.12 a request's Task starts eagerly, so an app
//! that answers at once completes its response inside `dispatch`, and
//! `response_complete` asks for the next request while this one is still
//! being dispatched. `next_request` loops instead of recursing (a long
//! pipeline cannot exhaust the stack), and no borrow of the connection is
//! held across a call into Python.
//!
//! Why native: these steps were about 250 bytecodes of every request, in
//! five Python frames, each reading the context's settings by name.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PySet, PyString, PyTuple};

use super::cycle::{monotonic, AsgiCycle};
use super::run::run_asgi_cycle;
use super::turn_writes::TurnWrites;
use crate::bridge::AppCalls;
use crate::py::asgi_scope::ScopeRepeats;
use crate::py::request::{Request, RequestParser};
use crate::py::request_counts::RequestCounts;

/// Unparsed bytes (pipelined requests waiting behind the current one) past
/// which reading pauses until the current response is done.
const PIPELINE_LIMIT: usize = 256 * 1024;

/// A header timeout of 0 means none.
fn timeout_or_never(seconds: f64) -> f64 {
    if seconds > 0.0 {
        seconds
    } else {
        f64::INFINITY
    }
}

/// One asgi worker's settings and parts as its connections use them, read
/// from its `AsgiContext` once. `screened` is the context's to set
/// (`AsgiContext.screened`, a property over it).
#[pyclass(frozen, module = "supervise._native")]
pub struct AsgiHttpShared {
    parser: Py<RequestParser>,
    header_timeout: f64,
    keepalive: f64,
    limit_body: u64,
    /// The worker's ServeState (`stopping`).
    serve_state: Py<PyAny>,
    root_path: Py<PyString>,
    /// What the lifespan startup left in its state: each request's scope
    /// gets a shallow copy.
    lifespan_state: Py<PyDict>,
    calls: Py<AppCalls>,
    /// Makes a request's Task (`task_start.task_starter`).
    start_task: Py<PyAny>,
    counts: Py<RequestCounts>,
    /// The field names proxy headers may come in, when any are trusted.
    proxy_fields: Option<Py<PyTuple>>,
    /// The class of a request's cycle (asgi_cycle.py's RequestCycle).
    cycle_class: Py<PyAny>,
    /// Whether anything is decided before the app (the subclass's `_screen`).
    screened: AtomicBool,
    /// Whole responses waiting for the end of the loop's turn.
    turn_writes: Py<TurnWrites>,
    /// The context's set of open connections (`AsgiContext.connections`).
    connections: Py<PySet>,
}

#[pymethods]
impl AsgiHttpShared {
    #[new]
    fn new(ctx: &Bound<'_, PyAny>, cycle_class: Py<PyAny>) -> PyResult<Self> {
        let py = ctx.py();
        let get = |name: &str| ctx.getattr(name);
        let proxy = get("proxy")?;
        let proxy_fields = if proxy.getattr(intern!(py, "enabled"))?.is_truthy()? {
            Some(
                proxy
                    .getattr(intern!(py, "header_tuple"))?
                    .cast_into()?
                    .unbind(),
            )
        } else {
            None
        };
        Ok(AsgiHttpShared {
            parser: get("parser")?.cast_into()?.unbind(),
            header_timeout: timeout_or_never(get("header_timeout")?.extract()?),
            keepalive: get("keepalive")?.extract()?,
            limit_body: get("limit_body")?.extract()?,
            serve_state: get("state")?.unbind(),
            root_path: get("root_path")?.cast_into()?.unbind(),
            lifespan_state: get("lifespan_state")?.cast_into()?.unbind(),
            calls: get("calls")?.cast_into()?.unbind(),
            start_task: get("start_task")?.unbind(),
            counts: get("counts")?.cast_into()?.unbind(),
            proxy_fields,
            cycle_class,
            screened: AtomicBool::new(false),
            turn_writes: Py::new(py, TurnWrites::new(&get("loop")?)?)?,
            connections: get("connections")?.cast_into()?.unbind(),
        })
    }

    #[getter]
    fn screened(&self) -> bool {
        self.screened.load(Ordering::Relaxed)
    }

    #[setter]
    fn set_screened(&self, screened: bool) {
        self.screened.store(screened, Ordering::Relaxed);
    }
}

impl AsgiHttpShared {
    pub(super) fn keepalive(&self) -> f64 {
        self.keepalive
    }

    pub(super) fn limit_body(&self) -> u64 {
        self.limit_body
    }

    pub(super) fn serve_state(&self) -> &Py<PyAny> {
        &self.serve_state
    }

    pub(super) fn turn_writes(&self) -> &Py<TurnWrites> {
        &self.turn_writes
    }

    pub(super) fn open_connections(&self, py: Python<'_>) -> usize {
        self.connections.bind(py).len()
    }

    pub(super) fn counts(&self) -> &Py<RequestCounts> {
        &self.counts
    }
}

#[pyclass(subclass, module = "supervise._native")]
pub struct AsgiHttpConnection {
    #[pyo3(get)]
    ctx: Py<PyAny>,
    /// The client a PROXY header named (--proxy-protocol); None: the socket's peer.
    #[pyo3(get)]
    peer: Py<PyAny>,
    shared: Py<AsgiHttpShared>,
    #[pyo3(get, set)]
    transport: Py<PyAny>,
    /// The connection's `ConnectionInfo` once seated (None while queued);
    /// its scope base and trust are kept beside it, read once.
    info: Py<PyAny>,
    http_base: Option<Py<PyDict>>,
    trusted: bool,
    /// The last request's scope values, for the next (py/repeats.rs).
    repeats: ScopeRepeats,
    /// Bytes no request has consumed yet.
    #[pyo3(get, set)]
    buf: Py<PyBytes>,
    /// The request whose response is not done.
    #[pyo3(get, set)]
    cycle: Option<Py<AsgiCycle>>,
    /// When the sweep gives up on the connection while no request is being
    /// served: header_timeout for a head, keepalive when idle.
    #[pyo3(get, set)]
    deadline: f64,
    /// Has answered a request: idle then means keep-alive idle.
    #[pyo3(get, set)]
    served: bool,
    /// Since when it waits on its client: seated, or its last response done.
    #[pyo3(get, set)]
    idle_since: f64,
    #[pyo3(get, set)]
    read_paused: bool,
    #[pyo3(get, set)]
    write_paused: bool,
    /// Inside `next_request`.
    dispatching: bool,
    /// Another request may be ready: `next_request` looks again.
    #[pyo3(get, set, name = "_again")]
    again: bool,
}

#[pymethods]
impl AsgiHttpConnection {
    #[new]
    #[pyo3(signature = (ctx, peer = None))]
    fn new(ctx: &Bound<'_, PyAny>, peer: Option<Py<PyAny>>) -> PyResult<Self> {
        let py = ctx.py();
        Ok(AsgiHttpConnection {
            shared: ctx.getattr(intern!(py, "http1"))?.cast_into()?.unbind(),
            ctx: ctx.clone().unbind(),
            peer: peer.unwrap_or_else(|| py.None()),
            transport: py.None(),
            info: py.None(),
            http_base: None,
            trusted: false,
            repeats: ScopeRepeats::kept(),
            buf: PyBytes::new(py, b"").unbind(),
            cycle: None,
            deadline: f64::INFINITY,
            served: false,
            idle_since: 0.0,
            read_paused: false,
            write_paused: false,
            dispatching: false,
            again: false,
        })
    }

    #[getter]
    fn info(&self, py: Python<'_>) -> Py<PyAny> {
        self.info.clone_ref(py)
    }

    #[setter]
    fn set_info(&mut self, info: Bound<'_, PyAny>) -> PyResult<()> {
        let py = info.py();
        if info.is_none() {
            self.http_base = None;
            self.trusted = false;
        } else {
            self.http_base = Some(
                info.getattr(intern!(py, "http_base"))?
                    .cast_into()?
                    .unbind(),
            );
            self.trusted = info.getattr(intern!(py, "trusted"))?.is_truthy()?;
        }
        self.info = info.unbind();
        Ok(())
    }

    fn data_received(slf: &Bound<'_, Self>, data: Bound<'_, PyBytes>) -> PyResult<()> {
        let py = slf.py();
        let (seated, cycle) = {
            let me = slf.borrow();
            (
                !me.info.is_none(py),
                me.cycle.as_ref().map(|c| c.clone_ref(py)),
            )
        };
        if !seated {
            slf.call_method1(intern!(py, "_data_while_queued"), (data,))?;
            return Ok(());
        }
        let mut data = data;
        if let Some(cycle) = &cycle {
            if cycle.borrow(py).body_pending() {
                data = AsgiCycle::feed_body_impl(cycle.bind(py), &data)?;
                if data.as_bytes().is_empty() {
                    return Ok(());
                }
            }
        }
        let buffered = {
            let me = slf.borrow();
            me.buf.clone_ref(py).into_bound(py)
        };
        let waiting_head = cycle.is_none();
        let size = if buffered.as_bytes().is_empty() {
            let deadline = if waiting_head {
                // The head must be complete within header_timeout of its first byte.
                let timeout = slf.borrow().shared.get().header_timeout;
                Some(monotonic(py)? + timeout)
            } else {
                None
            };
            let mut me = slf.borrow_mut();
            if let Some(deadline) = deadline {
                me.deadline = deadline;
            }
            let size = data.as_bytes().len();
            me.buf = data.unbind();
            size
        } else {
            let joined = buffered.add(&data)?.cast_into::<PyBytes>()?;
            let size = joined.as_bytes().len();
            slf.borrow_mut().buf = joined.unbind();
            size
        };
        if waiting_head {
            Self::next_request(slf)
        } else if size > PIPELINE_LIMIT {
            Self::pause_reading(slf)
        } else {
            Ok(())
        }
    }

    pub(super) fn pause_reading(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let transport = {
            let me = slf.borrow();
            if me.read_paused {
                return Ok(());
            }
            me.transport.clone_ref(py).into_bound(py)
        };
        if is_closing(&transport)? {
            return Ok(());
        }
        slf.borrow_mut().read_paused = true;
        transport.call_method0(intern!(py, "pause_reading"))?;
        Ok(())
    }

    pub(super) fn resume_reading(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let transport = {
            let mut me = slf.borrow_mut();
            if !me.read_paused {
                return Ok(());
            }
            me.read_paused = false;
            me.transport.clone_ref(py).into_bound(py)
        };
        if !is_closing(&transport)? {
            transport.call_method0(intern!(py, "resume_reading"))?;
        }
        Ok(())
    }

    pub(super) fn close(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let transport = slf.borrow().transport.clone_ref(py).into_bound(py);
        if !is_closing(&transport)? {
            transport.call_method0(intern!(py, "close"))?;
        }
        Ok(())
    }

    /// The cycle's response is fully written: close, or wait for the next request.
    pub(super) fn response_complete(
        slf: &Bound<'_, Self>,
        cycle: &Bound<'_, AsgiCycle>,
        keep_alive: bool,
    ) -> PyResult<()> {
        let py = slf.py();
        let (transport, shared) = {
            let mut me = slf.borrow_mut();
            if !me.cycle.as_ref().is_some_and(|c| c.is(cycle)) {
                return Ok(());
            }
            me.cycle = None;
            (me.transport.clone_ref(py), me.shared.clone_ref(py))
        };
        let shared = shared.get();
        // Not on `stopping` alone: a head that said keep-alive before the
        // stop began lets the client send again at once, so the connection
        // goes idle and the stop's sweep closes it after its grace, as any
        // idle one (closing now raced with that next request).
        if !keep_alive || is_closing(transport.bind(py))? {
            return Self::close(slf);
        }
        let now = monotonic(py)?;
        let (paused, more) = {
            let mut me = slf.borrow_mut();
            me.served = true;
            me.idle_since = now;
            let more = !me.buf.bind(py).as_bytes().is_empty();
            me.deadline = now
                + if more {
                    shared.header_timeout
                } else {
                    shared.keepalive
                };
            (me.read_paused, more)
        };
        if paused {
            Self::resume_reading(slf)?;
        }
        if more {
            Self::next_request(slf)?;
        }
        Ok(())
    }

    /// Serves the buffered requests, one at a time, while none is in flight.
    #[pyo3(name = "_next_request")]
    fn next_request(slf: &Bound<'_, Self>) -> PyResult<()> {
        {
            let mut me = slf.borrow_mut();
            if me.dispatching {
                me.again = true;
                return Ok(());
            }
            me.dispatching = true;
            me.again = true;
        }
        let result = Self::dispatch_while_ready(slf);
        slf.borrow_mut().dispatching = false;
        result
    }
}

fn is_closing(transport: &Bound<'_, PyAny>) -> PyResult<bool> {
    transport
        .call_method0(intern!(transport.py(), "is_closing"))?
        .is_truthy()
}

impl AsgiHttpConnection {
    pub(super) fn shared(&self) -> &Py<AsgiHttpShared> {
        &self.shared
    }

    pub(super) fn transport(&self) -> &Py<PyAny> {
        &self.transport
    }

    pub(super) fn is_write_paused(&self) -> bool {
        self.write_paused
    }

    fn dispatch_while_ready(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        loop {
            {
                let mut me = slf.borrow_mut();
                if !(me.again && me.cycle.is_none() && !me.buf.bind(py).as_bytes().is_empty()) {
                    return Ok(());
                }
                me.again = false;
            }
            Self::dispatch(slf)?;
        }
    }

    /// Parses the next head and starts its request.
    fn dispatch(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (buf, shared) = {
            let me = slf.borrow();
            (me.buf.clone_ref(py).into_bound(py), me.shared.clone_ref(py))
        };
        let shared = shared.get();
        let bytes = buf.as_bytes();
        let (req, size) = match shared.parser.get().parse_head(bytes) {
            Ok(Some(found)) => found,
            Ok(None) if bytes.len() > PIPELINE_LIMIT => {
                // The parser's limits make this unreachable.
                return refuse(slf, 431, "Request head too large");
            }
            Ok(None) => return Ok(()),
            Err(e) => return refuse(slf, e.status, e.reason),
        };
        let has_upgrade = req.head().upgrade().is_some();
        let req = Bound::new(py, req)?;
        slf.borrow_mut().deadline = f64::INFINITY;
        if has_upgrade {
            let taken = slf.call_method1(intern!(py, "_try_upgrade"), (&req, size))?;
            if taken.is_truthy()? {
                return Ok(());
            }
        }
        let rest = PyBytes::new(py, &bytes[size..]);
        slf.borrow_mut().buf = rest.unbind();
        let static_answer = if shared.screened() {
            let screened = slf.call_method1(intern!(py, "_screen"), (&req,))?;
            let (answered, static_answer): (bool, Bound<'_, PyAny>) = screened.extract()?;
            if answered {
                return Ok(());
            }
            Some(static_answer).filter(|s| !s.is_none())
        } else {
            None
        };
        let Some(scope) = Self::scope(slf, shared, &req)? else {
            return Ok(()); // refused
        };
        Self::start(slf, shared, req, scope, static_answer)
    }

    /// The request's http scope: the connection's keys copied, the request's
    /// filled in; None when proxy headers contradicted each other (refused).
    fn scope<'py>(
        slf: &Bound<'py, Self>,
        shared: &AsgiHttpShared,
        req: &Bound<'py, Request>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let py = slf.py();
        let (base, trusted) = {
            let me = slf.borrow();
            let base = me.http_base.as_ref().map(|b| b.clone_ref(py));
            (base, me.trusted)
        };
        let base = base.ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err("a request on a connection not seated")
        })?;
        let scope = base.bind(py).copy()?;
        scope.set_item(intern!(py, "state"), shared.lifespan_state.bind(py).copy()?)?;
        // Taken out while in use: making the values may collect garbage,
        // and a finalizer must not find the connection borrowed.
        let root_path = shared.root_path.bind(py).to_str()?;
        let mut repeats = std::mem::take(&mut slf.borrow_mut().repeats);
        let filled = req
            .get()
            .fill_asgi_scope_from(&scope, root_path, true, &mut repeats);
        slf.borrow_mut().repeats = repeats;
        filled?;
        if let (true, Some(names)) = (trusted, &shared.proxy_fields) {
            if let Some(found) = req.get().fields_named(py, names.bind(py))? {
                let kept = slf.call_method1(intern!(py, "_proxied"), (&scope, found))?;
                if !kept.is_truthy()? {
                    return Ok(None);
                }
            }
        }
        Ok(Some(scope))
    }

    /// Makes the request's cycle, gives it the body bytes already here and
    /// starts the Task that runs the app.
    fn start(
        slf: &Bound<'_, Self>,
        shared: &AsgiHttpShared,
        req: Bound<'_, Request>,
        scope: Bound<'_, PyDict>,
        static_answer: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = slf.py();
        let has_body = {
            let head = req.get().head();
            head.content_length.is_some_and(|n| n > 0) || head.chunked
        };
        let cycle = shared
            .cycle_class
            .bind(py)
            .call1((slf, req, scope))?
            .cast_into::<AsgiCycle>()?;
        slf.borrow_mut().cycle = Some(cycle.clone().unbind());
        if static_answer.is_some() && has_body {
            // A static answer reads no body: what follows the head is not a
            // request, so the connection ends with the answer.
            cycle.borrow_mut().set_keep_alive(false);
        }
        let rest = {
            let me = slf.borrow();
            me.buf.clone_ref(py).into_bound(py)
        };
        if !rest.as_bytes().is_empty() && cycle.borrow().body_pending() {
            slf.borrow_mut().buf = PyBytes::new(py, b"").unbind();
            let after = AsgiCycle::feed_body_impl(&cycle, &rest)?;
            slf.borrow_mut().buf = after.unbind();
        }
        let app = match static_answer {
            Some(answer) => Some(
                cycle
                    .call_method1(intern!(py, "static_app"), (answer,))?
                    .unbind(),
            ),
            None => None,
        };
        let run = run_asgi_cycle(py, shared.calls.clone_ref(py), cycle.unbind(), app)?;
        shared.start_task.bind(py).call1((run,))?;
        Ok(())
    }
}

/// Answers a request that cannot be served and closes the connection (the
/// subclass's `_refuse`, which logs why).
fn refuse(slf: &Bound<'_, AsgiHttpConnection>, status: u16, reason: &str) -> PyResult<()> {
    slf.call_method1(intern!(slf.py(), "_refuse"), (status, reason))?;
    Ok(())
}
