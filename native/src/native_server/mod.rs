//! `NativeServer`: what the rsgi and native workers hold, whatever the app's
//! interface (RSGI, ASGI, WSGI). It starts the native server on the inherited
//! listeners and turns the bridge's events into app calls and completed
//! futures, on the loop's thread, in one GIL-holding `drain()`. The one
//! module that knows every adapter: the layers below it know none above.

mod config;
mod tls;

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::asgi::{AsgiApp, HttpCycle};
use crate::bridge::{
    complete, AppCalls, AppRun, Bridge, BridgeDispatch, Event, Forwarded, LoopCtx, Proxied,
};
use crate::rsgi::{HTTPProtocol, Scope, WebsocketProtocol};
use crate::server::{Reply, Server};
use crate::wsgi::{AppClock, WsgiApp, WsgiDispatch};
pub use tls::NativeTls;

/// The app a server runs, and what its interface needs kept.
enum App {
    /// An RSGI app and the worker's callables: each request and WebSocket
    /// session run as an `AppRun`.
    Rsgi(Py<AppCalls>),
    /// An ASGI app: each request run as an `AppRun`, WebSockets by its
    /// `ws_handler`.
    Asgi(Py<AsgiApp>),
    /// A WSGI app, called on the runtime threads themselves (`wsgi/`): how
    /// long it has held them. Its requests never reach the loop.
    Wsgi(Arc<AppClock>),
}

#[pyclass(module = "supervise._native", frozen)]
pub struct NativeServer {
    ctx: Arc<LoopCtx>,
    app: App,
    create_task: Py<PyAny>,
    server: Mutex<Option<Server>>,
    /// Set when `forwarded_allow_ips` trusts some peer.
    forwarded: Option<Forwarded>,
}

#[pymethods]
impl NativeServer {
    /// `app` is one of: an `AppCalls` (an RSGI app: each request and
    /// WebSocket session run as an `AppRun`), an `AsgiApp` (each request
    /// run as an `AppRun`, WebSockets by its `ws_handler`), a `WsgiApp`
    /// (called on the runtime threads themselves, `native/src/wsgi`).
    /// `event_loop`: where an RSGI or ASGI app runs; None for a `WsgiApp`,
    /// whose worker has no loop.
    /// `settings`: config.rs. `proxy`: the proxy-header rules, when
    /// `forwarded_allow_ips` trusts some peer. `start_task(coro)` makes each
    /// app call a Task (default: the loop's `create_task`). `fds` are
    /// (fd, is_unix) of the listening sockets.
    #[new]
    #[pyo3(signature = (app, *, event_loop, fds, settings, proxy = None, start_task = None))]
    fn new(
        py: Python<'_>,
        app: &Bound<'_, PyAny>,
        event_loop: Option<&Bound<'_, PyAny>>,
        fds: Vec<(i32, bool)>,
        settings: &Bound<'_, PyDict>,
        proxy: Option<(Vec<String>, Py<PyAny>)>,
        start_task: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let config = config::server_config(settings)?;
        let forwarded = proxy
            .map(|(names, resolve)| Forwarded::new(names, resolve))
            .transpose()?;
        let bridge = Arc::new(Bridge::new().map_err(|e| PyOSError::new_err(e.to_string()))?);
        let wsgi = app.extract::<PyRef<'_, WsgiApp>>().ok();
        let app = if let Ok(calls) = app.extract::<Py<AppCalls>>() {
            App::Rsgi(calls)
        } else if let Ok(asgi) = app.extract::<Py<AsgiApp>>() {
            App::Asgi(asgi)
        } else if wsgi.is_some() {
            App::Wsgi(Arc::new(AppClock::new(config.threads)))
        } else {
            return Err(PyTypeError::new_err("app: an AppCalls, AsgiApp or WsgiApp"));
        };
        let dispatch: Box<dyn crate::server::Dispatch> = match (&wsgi, &app) {
            (Some(wsgi), App::Wsgi(clock)) => Box::new(WsgiDispatch::new(py, wsgi, clock.clone())),
            _ => Box::new(BridgeDispatch {
                bridge: bridge.clone(),
                interim: matches!(app, App::Asgi(_)),
            }),
        };
        let loop_calls = match (event_loop, &app) {
            (Some(event_loop), _) => Some(event_loop),
            (None, App::Wsgi(_)) => None,
            (None, _) => {
                return Err(PyTypeError::new_err(
                    "event_loop: an RSGI or ASGI app runs on a loop",
                ))
            }
        };
        if let Some(event_loop) = loop_calls.filter(|_| !matches!(app, App::Wsgi(_))) {
            // The app answers on this thread, the loop's (reply_batch.rs).
            let call_soon = event_loop.getattr("call_soon")?.unbind();
            let flush = wrap_pyfunction!(flush_replies, py)?.into_any().unbind();
            crate::server::batch_on_this_thread(std::rc::Rc::new(move || {
                Python::attach(|py| {
                    if let Err(e) = call_soon.call1(py, (flush.clone_ref(py),)) {
                        e.print(py);
                    }
                })
            }));
        }
        let server = py
            .detach(|| Server::start(config, fds, dispatch))
            .map_err(|e| PyOSError::new_err(format!("cannot start the native server: {e}")))?;
        // A WSGI app's requests never reach the bridge, so without a loop
        // nothing calls these two: None stands in for them.
        let on_loop = |name: &str| -> PyResult<Py<PyAny>> {
            Ok(match loop_calls {
                Some(event_loop) => event_loop.getattr(name)?.unbind(),
                None => py.None(),
            })
        };
        Ok(NativeServer {
            ctx: Arc::new(LoopCtx::new(bridge, on_loop("create_future")?)),
            create_task: match start_task {
                Some(start) => start,
                None => on_loop("create_task")?,
            },
            app,
            server: Mutex::new(Some(server)),
            forwarded,
        })
    }

    /// The fd the loop watches (`loop.add_reader(fd, server.drain)`).
    fn fileno(&self) -> i32 {
        self.ctx.bridge.fileno()
    }

    /// Starts the app for every new request and completes every finished
    /// read or send, in arrival order.
    fn drain(&self, py: Python<'_>) {
        crate::server::new_round();
        for event in self.ctx.bridge.take() {
            match event {
                Event::Request(ex) => self.start(py, ex),
                Event::WebSocket(ex) => self.start_ws(py, *ex),
                Event::Ready(fut, outcome) => complete(py, fut, outcome),
                Event::Call(f) => f(py),
            }
        }
    }

    /// Graceful stop: accept no more; idle connections close now, busy ones
    /// after their response.
    fn stop(&self) {
        if let Some(s) = self
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            s.stop();
        }
    }

    fn connections(&self) -> usize {
        self.with_server(|s| s.connections())
    }

    /// After `stop()`: no accept loop, connection or exchange is left (true
    /// once closed), so closing cuts nothing.
    fn drained(&self) -> bool {
        self.server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|s| s.drained())
    }

    /// WSGI: seconds for which every thread that calls the app has been in
    /// one call (0 while one is free, and always for RSGI, whose app runs on
    /// the loop and stops the loop's tick by itself).
    fn stuck_for(&self) -> f64 {
        match &self.app {
            App::Wsgi(clock) => clock.stuck_for(),
            _ => 0.0,
        }
    }

    fn in_flight(&self) -> usize {
        self.with_server(|s| s.in_flight())
    }

    /// The worker's tick: its loop is alive, and so are the threads that
    /// call a WSGI app unless they have all been in one call for a second.
    /// Without it for a second, the server stops accepting (runtime.rs).
    fn beat(&self) {
        if self.stuck_for() < 1.0 {
            self.with_server(|s| s.beat())
        }
    }

    /// Requests finished since the last call (the worker counts in batches).
    fn take_requests(&self) -> u64 {
        self.with_server(|s| s.take_requests())
    }

    /// Probes read the master's drain flag at `address` (the scoreboard's
    /// shared memory, which the worker keeps mapped) at each probe.
    fn watch_master_drain(&self, address: usize) {
        // SAFETY: the worker's scoreboard mapping outlives its server.
        self.with_server(|s| unsafe { s.health().watch_master(address) });
    }

    /// Health probes answered since the last call.
    fn take_health_checks(&self) -> u64 {
        self.with_server(|s| s.health().take_answered())
    }

    /// What the server answered itself since the last call (static files;
    /// probes under `--health-access-log`), for the access log and metrics:
    /// (client, method, target, protocol, status, body bytes, seconds,
    /// referer, user agent, probe) each, and how many did not fit the queue.
    #[allow(clippy::type_complexity)]
    fn take_answered(
        &self,
    ) -> (
        Vec<(
            String,
            String,
            String,
            &'static str,
            u16,
            u64,
            f64,
            Option<String>,
            Option<String>,
            bool,
        )>,
        u64,
    ) {
        self.with_server(|s| {
            let (records, dropped) = s.answered().take();
            let records = records
                .into_iter()
                .map(|r| {
                    (
                        r.client,
                        r.method,
                        r.target,
                        r.version,
                        r.status,
                        r.sent,
                        r.seconds,
                        r.referer,
                        r.user_agent,
                        r.probe,
                    )
                })
                .collect();
            (records, dropped)
        })
    }

    /// The clients dropped since the last call for not reading
    /// (`--send-timeout`, `--send-min-rate`): (client, why) each, and how
    /// many did not fit the queue.
    fn take_dropped(&self) -> (Vec<(String, &'static str)>, u64) {
        self.with_server(|s| {
            let (records, lost) = s.dropped().take();
            let records = records.into_iter().map(|r| (r.client, r.why)).collect();
            (records, lost)
        })
    }

    /// Ends the runtimes (what is still open is cut) and joins their threads.
    fn close(&self, py: Python<'_>) {
        crate::server::stop_batching();
        let server = self.server.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(server) = server {
            py.detach(|| server.close());
        }
    }
}

/// What the loop calls once per batch of replies (reply_batch.rs).
#[pyfunction]
fn flush_replies() {
    crate::server::flush_replies();
}

impl NativeServer {
    /// Starts `run` as the exchange's Task.
    fn run_task(&self, py: Python<'_>, run: AppRun) -> PyResult<()> {
        self.create_task.call1(py, (Py::new(py, run)?,))?;
        Ok(())
    }

    /// `f` on the running server; the default once it is closed.
    fn with_server<T: Default>(&self, f: impl FnOnce(&Server) -> T) -> T {
        self.server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or_else(T::default, f)
    }

    /// What a trusted proxy's headers say about this request; Err(status)
    /// when the request must be refused instead (logged here if a 500).
    fn proxied(
        &self,
        py: Python<'_>,
        fields: crate::server::FieldsOf<'_>,
        conn: &crate::server::ConnInfo,
    ) -> Result<Proxied, hyper::StatusCode> {
        let Some(forwarded) = &self.forwarded else {
            return Ok(Proxied::default());
        };
        forwarded.apply(py, fields, &conn.client).map_err(|err| {
            if err.is_instance_of::<PyValueError>(py) {
                hyper::StatusCode::BAD_REQUEST
            } else {
                err.print(py);
                hyper::StatusCode::INTERNAL_SERVER_ERROR
            }
        })
    }

    /// `ex` stays boxed until its fields go where they are kept, instead of
    /// being copied whole at each step (rsgi GET 4 B: 34.48k -> 34.25k
    /// instructions a request).
    fn start(&self, py: Python<'_>, ex: Box<crate::server::Exchange>) {
        match &self.app {
            App::Rsgi(calls) => self.start_rsgi(py, calls, ex),
            App::Asgi(app) => self.start_asgi(py, app.get(), ex),
            // Served on the runtime threads: never queued for the loop.
            App::Wsgi(_) => drop(ex),
        }
    }

    fn start_rsgi(&self, py: Python<'_>, calls: &Py<AppCalls>, ex: Box<crate::server::Exchange>) {
        let measured = calls.get().measured();
        let (proto, head, conn) = HTTPProtocol::new(self.ctx.clone(), ex, measured);
        let reply = proto.reply_slot();
        let proxied = match self.proxied(py, head.fields(), &conn) {
            Ok(proxied) => proxied,
            Err(status) => return Self::refuse_proxied(&reply, status),
        };
        let result = (|| -> PyResult<()> {
            let scope = Py::new(py, Scope::new(head, conn, proxied))?.into_any();
            let proto = Box::new(Py::new(py, proto)?);
            self.run_task(py, AppRun::new(calls.clone_ref(py), scope, proto))
        })();
        if let Err(err) = result {
            // AppRun logs the app's errors itself; this is starting it failing.
            err.print(py);
            reply.send(Reply::server_error());
        }
    }

    fn start_asgi(&self, py: Python<'_>, app: &AsgiApp, ex: Box<crate::server::Exchange>) {
        let mut cycle = HttpCycle::new(self.ctx.clone(), ex);
        let reply = cycle.reply_slot();
        let conn = cycle.conn();
        let proxied = match self.proxied(py, cycle.head().fields(), &conn) {
            Ok(proxied) => proxied,
            Err(status) => return Self::refuse_proxied(&reply, status),
        };
        let result = (|| -> PyResult<()> {
            let hints = cycle.writes_interim();
            let bridge = &self.ctx.bridge;
            let scope = app.http_scope(py, cycle.head(), &conn, &proxied, hints, bridge)?;
            cycle.set_proxied_client(proxied.client);
            if let Some(access) = &app.calls.get().access {
                if access.get().reads_response_fields() {
                    cycle.keep_response_fields();
                }
            }
            let cycle = Box::new(Py::new(py, cycle)?);
            let run = AppRun::new(app.calls.clone_ref(py), scope.into_any().unbind(), cycle);
            self.run_task(py, run)?;
            Ok(())
        })();
        if let Err(err) = result {
            err.print(py);
            reply.send(Reply::server_error());
        }
    }

    /// What a request whose proxy headers were refused gets.
    fn refuse_proxied(reply: &crate::server::ReplySlot, status: hyper::StatusCode) {
        reply.send(if status == hyper::StatusCode::BAD_REQUEST {
            Reply::bad_request("Contradictory scheme headers")
        } else {
            Reply::server_error()
        });
    }

    fn start_ws(&self, py: Python<'_>, ex: crate::server::WsExchange) {
        let (proto, head, conn) = WebsocketProtocol::new(self.ctx.clone(), ex);
        // Dropping it unanswered would be a 500 too, but this logs why.
        let proto = match Py::new(py, proto) {
            Ok(p) => p,
            Err(err) => return err.print(py),
        };
        let proxied = match self.proxied(py, crate::server::FieldsOf::Map(&head.headers), &conn) {
            Ok(proxied) => proxied,
            Err(status) => {
                proto.get().refuse(status);
                return;
            }
        };
        let result = (|| -> PyResult<()> {
            let coro = match &self.app {
                App::Asgi(app) => {
                    let app = app.get();
                    let scope = app.websocket_scope(py, &head, &conn, &proxied)?;
                    app.ws_handler.call1(py, (scope, proto.clone_ref(py)))?
                }
                App::Rsgi(calls) => {
                    let scope = Py::new(py, Scope::websocket(head, conn, proxied))?.into_any();
                    let proto = Box::new(proto.clone_ref(py));
                    return self.run_task(py, AppRun::new(calls.clone_ref(py), scope, proto));
                }
                // The engine serves WSGI with WebSockets off.
                App::Wsgi(_) => return Ok(()),
            };
            self.create_task.call1(py, (coro,))?;
            Ok(())
        })();
        if let Err(err) = result {
            err.print(py);
            proto.get().refuse(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeServer>()?;
    m.add_class::<NativeTls>()?;
    Ok(())
}
