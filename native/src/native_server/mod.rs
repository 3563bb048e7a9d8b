//! `NativeServer`: what the rsgi and native workers hold, whatever the app's
//! interface (RSGI, ASGI, WSGI). It starts the native server on the inherited
//! listeners and turns the bridge's events into app calls and completed
//! futures, on the loop's thread, in one GIL-holding `drain()`. The one
//! module that knows every adapter: the layers below it know none above.

mod tls;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::header::HeaderValue;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::asgi::{AsgiApp, HttpCycle};
use crate::bridge::{
    complete, AppCalls, AppRun, Bridge, BridgeDispatch, Event, Forwarded, LoopCtx, Proxied,
};
use crate::rsgi::{HTTPProtocol, Scope, WebsocketProtocol};
use crate::server::{Http2Config, HttpMode, Reply, RuntimeMode, Server, ServerConfig, WsConfig};
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

fn seconds(s: f64) -> Option<Duration> {
    (s > 0.0).then(|| Duration::from_secs_f64(s))
}

#[pymethods]
impl NativeServer {
    /// One of: `rsgi`, an RSGI app, each request and WebSocket session run
    /// as an `AppRun` (app_run.rs); `wsgi`, the WSGI app called on the
    /// runtime threads themselves (`native/src/wsgi`); `asgi`, each request
    /// run as an `AppRun`, WebSockets by its `ws_handler`. `start_task(coro)`
    /// makes each a Task (default: the loop's `create_task`). `fds` are
    /// (fd, is_unix) of the listening sockets.
    #[new]
    #[pyo3(signature = (*, rsgi = None, event_loop, fds, threads = 1, mode = "st", header_timeout = 10.0,
        send_timeout = 30.0, keepalive = 2.0, limit_request_line = 4094, limit_request_fields = 100,
        limit_request_field_size = 8190, limit_request_body = 0, limit_concurrency = 0, backpressure = 0, worker_connections = 0,
        max_requests = 0,
        date_header = true,
        server_header = None, http = "auto", http2_max_concurrent_streams = 200,
        http2_initial_stream_window_size = 1048576, http2_initial_connection_window_size = 1048576,
        http2_max_frame_size = 16384, http2_max_headers_size = 65536,
        http2_max_send_buffer_size = 409600, http2_keep_alive_interval = 0.0,
        http2_keep_alive_timeout = 20.0, tls = None, ws = true, ws_max_size = 16777216,
        ws_ping_interval = 20.0, ws_ping_timeout = 20.0, proxy = None,
        proxy_allow = None, wsgi = None, asgi = None, start_task = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rsgi: Option<Py<AppCalls>>,
        event_loop: &Bound<'_, PyAny>,
        fds: Vec<(i32, bool)>,
        threads: usize,
        mode: &str,
        header_timeout: f64,
        send_timeout: f64,
        keepalive: f64,
        limit_request_line: usize,
        limit_request_fields: usize,
        limit_request_field_size: usize,
        limit_request_body: u64,
        limit_concurrency: usize,
        backpressure: usize,
        worker_connections: usize,
        max_requests: u64,
        date_header: bool,
        server_header: Option<&str>,
        http: &str,
        http2_max_concurrent_streams: u32,
        http2_initial_stream_window_size: u32,
        http2_initial_connection_window_size: u32,
        http2_max_frame_size: u32,
        http2_max_headers_size: u32,
        http2_max_send_buffer_size: usize,
        http2_keep_alive_interval: f64,
        http2_keep_alive_timeout: f64,
        tls: Option<PyRef<'_, NativeTls>>,
        ws: bool,
        ws_max_size: usize,
        ws_ping_interval: f64,
        ws_ping_timeout: f64,
        proxy: Option<(Vec<String>, Py<PyAny>)>,
        proxy_allow: Option<Vec<String>>,
        wsgi: Option<PyRef<'_, WsgiApp>>,
        asgi: Option<Py<AsgiApp>>,
        start_task: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let sides = [rsgi.is_some(), wsgi.is_some(), asgi.is_some()];
        if sides.iter().filter(|&&given| given).count() != 1 {
            return Err(PyValueError::new_err("give one of rsgi, wsgi or asgi"));
        }
        let forwarded = proxy
            .map(|(names, resolve)| Forwarded::new(names, resolve))
            .transpose()?;
        let http = match http {
            "auto" => HttpMode::Auto,
            "1" => HttpMode::H1,
            "2" => HttpMode::H2,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown http mode {other:?}"
                )))
            }
        };
        let mode = match mode {
            "st" => RuntimeMode::St,
            "mt" => RuntimeMode::Mt,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown runtime mode {other:?}"
                )))
            }
        };
        let server_header = server_header
            .map(HeaderValue::from_str)
            .transpose()
            .map_err(|_| PyValueError::new_err("invalid Server header value"))?;
        // `proxy_allow`: --proxy-protocol is on and these peers must send a header.
        let proxy = proxy_allow
            .map(|items| crate::proxy::Allow::parse(&items))
            .transpose()
            .map_err(PyValueError::new_err)?;
        let config = ServerConfig {
            proxy,
            threads,
            mode,
            header_timeout: seconds(header_timeout),
            send_timeout: seconds(send_timeout),
            keepalive: seconds(keepalive),
            limit_request_line,
            limit_request_fields,
            limit_request_field_size,
            limit_request_body,
            limit_concurrency,
            backpressure,
            max_connections: worker_connections,
            max_requests,
            date_header,
            server_header,
            scheme: if tls.is_some() { "https" } else { "http" },
            http,
            http2: Http2Config {
                max_concurrent_streams: http2_max_concurrent_streams,
                initial_stream_window_size: http2_initial_stream_window_size,
                initial_connection_window_size: http2_initial_connection_window_size,
                max_frame_size: http2_max_frame_size,
                max_header_list_size: http2_max_headers_size,
                max_send_buffer_size: http2_max_send_buffer_size,
                keep_alive_interval: seconds(http2_keep_alive_interval),
                keep_alive_timeout: seconds(http2_keep_alive_timeout)
                    .unwrap_or(Duration::from_secs(20)),
            },
            tls: tls.map(|t| t.config.clone()),
            ws: ws.then(|| WsConfig {
                max_size: ws_max_size,
                ping_interval: seconds(ws_ping_interval),
                ping_timeout: seconds(ws_ping_timeout),
            }),
        };
        let bridge = Arc::new(Bridge::new().map_err(|e| PyOSError::new_err(e.to_string()))?);
        let app = match (rsgi, asgi, wsgi.as_ref()) {
            (Some(calls), None, None) => App::Rsgi(calls),
            (None, Some(app), None) => App::Asgi(app),
            _ => App::Wsgi(Arc::new(AppClock::new(threads))),
        };
        let dispatch: Box<dyn crate::server::Dispatch> = match (&wsgi, &app) {
            (Some(wsgi), App::Wsgi(clock)) => Box::new(WsgiDispatch::new(py, wsgi, clock.clone())),
            _ => Box::new(BridgeDispatch {
                bridge: bridge.clone(),
                interim: matches!(app, App::Asgi(_)),
            }),
        };
        if !matches!(app, App::Wsgi(_)) {
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
        Ok(NativeServer {
            ctx: Arc::new(LoopCtx::new(
                bridge,
                event_loop.getattr("create_future")?.unbind(),
            )),
            app,
            create_task: match start_task {
                Some(start) => start,
                None => event_loop.getattr("create_task")?.unbind(),
            },
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
                Event::Request(ex) => self.start(py, *ex),
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
        head: &hyper::http::request::Parts,
        conn: &crate::server::ConnInfo,
    ) -> Result<Proxied, hyper::StatusCode> {
        let Some(forwarded) = &self.forwarded else {
            return Ok(Proxied::default());
        };
        forwarded
            .apply(py, &head.headers, &conn.client)
            .map_err(|err| {
                if err.is_instance_of::<PyValueError>(py) {
                    hyper::StatusCode::BAD_REQUEST
                } else {
                    err.print(py);
                    hyper::StatusCode::INTERNAL_SERVER_ERROR
                }
            })
    }

    fn start(&self, py: Python<'_>, ex: crate::server::Exchange) {
        match &self.app {
            App::Rsgi(calls) => self.start_rsgi(py, calls, ex),
            App::Asgi(app) => self.start_asgi(py, app.get(), ex),
            // Served on the runtime threads: never queued for the loop.
            App::Wsgi(_) => drop(ex),
        }
    }

    fn start_rsgi(&self, py: Python<'_>, calls: &Py<AppCalls>, ex: crate::server::Exchange) {
        let measured = calls.get().done.is_some();
        let (proto, head, conn) = HTTPProtocol::new(self.ctx.clone(), ex, measured);
        let reply = proto.reply_slot();
        let proxied = match self.proxied(py, &head, &conn) {
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

    fn start_asgi(&self, py: Python<'_>, app: &AsgiApp, ex: crate::server::Exchange) {
        let (cycle, head) = HttpCycle::new(self.ctx.clone(), ex);
        let reply = cycle.reply_slot();
        let conn = cycle.conn();
        let proxied = match self.proxied(py, &head, &conn) {
            Ok(proxied) => proxied,
            Err(status) => return Self::refuse_proxied(&reply, status),
        };
        let result = (|| -> PyResult<()> {
            let scope = app.http_scope(py, &head, &conn, &proxied, cycle.writes_interim())?;
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
        let proxied = match self.proxied(py, &head, &conn) {
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
