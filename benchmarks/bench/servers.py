"""Every server the suite runs: how to launch it, what it can serve.

Peers are described once here with the command line their own docs recommend for speed;
supervise's worker classes come from a capability table, so scenarios (HTTP/2,
WebSocket, event loops, runtime threads) are added for supervise as soon as a worker
class exists and speaks them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from apps import payload

from bench.peers import BENCH_DIR, DISTRIBUTION, Venv
from bench.scenarios import STATIC

# Scripts that run a peer with no command line of its own (or none usable on every Python
# of the suite) on host/port: one per peer, named run_<peer>.py.
LAUNCHERS = BENCH_DIR / "launchers"

APPS = {
    "wsgi": "apps.wsgi_app:app",
    "asgi": "apps.asgi_app:app",
    "rsgi": "apps.rsgi_app:app",
}
# The echo app (tests/apps/echo_app.py) answers with what the server handed it: the
# conformance replay (benchmarks/conformance.py) judges each server's parser by it.
ECHO_APPS = {"wsgi": "echo_app:app", "asgi": "echo_app:asgi_app", "rsgi": "echo_app:rsgi_app"}
HOST = "127.0.0.1"
# The same thread count for every threaded WSGI worker, so gthread compares like for like.
THREADS = 4
WORKER_CONNECTIONS = 1000


@dataclass(frozen=True)
class Options:
    """The dimension being varied for one run; None keeps the server's own default."""

    workers: int = 1
    loop: str | None = None
    runtime_threads: int | None = None
    runtime_mode: str | None = None  # "st" | "mt": tokio runtime per thread, or one shared
    # False: server and load generator may run on every core (the deploy table), as users
    # run them; True: the server on its core, the load generator on another.
    pinned: bool = True
    # With pinned False: the server on one set of cores and the load generator on another
    # (--server-cpus / --load-cpus, a machine with many cores) rather than both on all.
    split: bool = False
    echo: bool = False  # serve the echo app instead of the benchmark app
    # Set from the scenario (plan.server_options), not a table's dimension: TLS on the TCP
    # port with the suite's self-signed certificate (tls_files), and HTTP/3 on the same
    # port number over UDP as well (quic).
    tls: bool = False
    quic: bool = False

    def app(self, interface: str) -> str:
        return (ECHO_APPS if self.echo else APPS)[interface]

    def label(self) -> str:
        parts = [f"{self.workers}w"]
        if self.loop:
            parts.append(self.loop)
        if self.runtime_mode:
            parts.append(self.runtime_mode)
        if self.runtime_threads:
            parts.append(f"{self.runtime_threads}rt")
        if not self.pinned:
            parts.append("split" if self.split else "unpinned")
        if self.echo:
            parts.append("echo")
        if self.quic:
            parts.append("tls+h3")
        elif self.tls:
            parts.append("tls")
        return " ".join(parts)


class Unsupported(Exception):
    """This server has no way to run with the requested options."""


Builder = Callable[[Venv, int, Options], list[str]]


@dataclass(frozen=True)
class Server:
    name: str
    interface: str  # "wsgi" | "asgi" | "rsgi"
    dist: str  # distribution whose version identifies the server
    build: Builder = field(repr=False)
    # beyond HTTP/1.1 in clear text: "h2" (h2c), "h2tls" (ALPN h2), "h3", "ws"
    features: frozenset[str] = frozenset()
    probe_features: bool = False  # try unlisted features and use them if they work
    loops: tuple[str, ...] = ()
    runtime_threads: bool = False
    runtime_mode: bool = False  # accepts --runtime-mode st|mt
    multi_worker: bool = True
    quick: bool = False  # part of the --quick subset
    explicit: bool = False  # run only when --servers names it (a variant, not a peer)
    tls: bool = False  # its builder starts it with the certificate when Options.tls asks
    note: str = ""
    # A program of the system rather than a PyPI distribution (nginx): found on PATH,
    # its version asked of it (set by available_peers).
    system: str = ""
    version: str = ""

    @property
    def is_supervise(self) -> bool:
        return self.name.startswith("supervise")

    def command(self, venv: Venv, port: int, opts: Options) -> list[str]:
        if opts.echo and self.interface == STATIC:
            raise Unsupported("serves a folder of files, not the echo app")
        if opts.workers != 1 and not self.multi_worker:
            raise Unsupported("runs a single process only")
        if opts.loop and opts.loop not in self.loops:
            raise Unsupported(f"cannot run on the {opts.loop} loop")
        if opts.runtime_threads and not self.runtime_threads:
            raise Unsupported("has no runtime threads setting")
        if opts.runtime_mode and not self.runtime_mode:
            raise Unsupported("has no runtime mode setting (st/mt)")
        if opts.tls and not self.tls:
            raise Unsupported("not started over TLS by this suite")
        if opts.quic and "h3" not in self.features:
            raise Unsupported("serves no HTTP/3")
        return self.build(venv, port, opts)


# -- TLS: one self-signed certificate per run, for 127.0.0.1 ----------------------------
TLS_DIR = BENCH_DIR / ".work" / "tls"
# HTTP/3 on a UDP address: supervise's and Hypercorn's name alike.
QUIC_FLAG = "--quic-bind"
_tls_made: list[tuple[str, str]] = []  # this process's (cert, key), made on first use


def tls_files() -> tuple[str, str]:
    """The certificate and key (PEM) the TLS and HTTP/3 scenarios' servers are started
    with: a fresh self-signed P-256 certificate for IP 127.0.0.1 the first time a run asks,
    under .work/tls/. Relative to benchmarks/, where servers start, so the report's command
    lines stay free of this checkout's path. The load generators do not verify it."""
    if not _tls_made:
        TLS_DIR.mkdir(parents=True, exist_ok=True)
        cert, key = TLS_DIR / "cert.pem", TLS_DIR / "key.pem"
        cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt"]
        cmd += ["ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj"]
        cmd += [f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST}"]
        cmd += ["-keyout", str(key), "-out", str(cert)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unsupported(f"no certificate: openssl failed ({exc})") from exc
        if done.returncode != 0:
            raise Unsupported(f"no certificate: openssl exited {done.returncode}")
        _tls_made.append((str(cert.relative_to(BENCH_DIR)), str(key.relative_to(BENCH_DIR))))
    return _tls_made[0]


def _tls_args(opts: Options, port: int) -> list[str]:
    """The certificate options, and --quic-bind on the TCP port's number for HTTP/3: the
    names supervise and Hypercorn share (Gunicorn's)."""
    if not opts.tls and not opts.quic:
        return []
    cert, key = tls_files()
    args = ["--certfile", cert, "--keyfile", key]
    if opts.quic:
        args += [QUIC_FLAG, f"{HOST}:{port}"]
    return args


def _granian(interface: str) -> Builder:
    def build(venv: Venv, port: int, opts: Options) -> list[str]:
        cmd = [venv.bin("granian"), "--interface", interface, "--host", HOST, "--port", str(port)]
        cmd += ["--workers", str(opts.workers), "--no-access-log", "--log-level", "warning"]
        if opts.loop:
            cmd += ["--loop", opts.loop]
        if opts.runtime_threads:
            cmd += ["--runtime-threads", str(opts.runtime_threads)]
        if opts.runtime_mode:
            cmd += ["--runtime-mode", opts.runtime_mode]
        return [*cmd, opts.app(interface)]

    return build


def _uvicorn(http: str) -> Builder:
    def build(venv: Venv, port: int, opts: Options) -> list[str]:
        cmd = [venv.bin("uvicorn"), "--host", HOST, "--port", str(port), "--http", http]
        cmd += ["--loop", opts.loop or "uvloop", "--workers", str(opts.workers)]
        return [*cmd, "--no-access-log", "--log-level", "warning", opts.app("asgi")]

    return build


def _hypercorn(venv: Venv, port: int, opts: Options) -> list[str]:
    cmd = [venv.bin("hypercorn"), "-k", opts.loop or "uvloop", "-w", str(opts.workers)]
    # Over TLS it offers h2 by ALPN; --quic-bind (aioquic) adds HTTP/3 on the UDP port.
    cmd += _tls_args(opts, port)
    return [*cmd, "-b", f"{HOST}:{port}", "--log-level", "warning", opts.app("asgi")]


def _daphne(venv: Venv, port: int, opts: Options) -> list[str]:
    return [venv.bin("daphne"), "-b", HOST, "-p", str(port), "-v", "0", opts.app("asgi")]


def _gunicorn(worker: str, interface: str, *extra: str) -> Builder:
    def build(venv: Venv, port: int, opts: Options) -> list[str]:
        cmd = [venv.bin("gunicorn"), "-k", worker, "-w", str(opts.workers), *extra]
        return [*cmd, "-b", f"{HOST}:{port}", "--log-level", "warning", opts.app(interface)]

    return build


def _gunicorn_asgi(venv: Venv, port: int, opts: Options) -> list[str]:
    extra = ["--http-protocols", "h2,h1", "--http2-cleartext", "both"]
    extra += ["--asgi-loop", opts.loop or "auto"]
    return _gunicorn("asgi", "asgi", *extra)(venv, port, opts)


def _uwsgi(venv: Venv, port: int, opts: Options) -> list[str]:
    return [
        venv.bin("uwsgi"),
        "--http11-socket",
        f"{HOST}:{port}",
        "--home",
        str(venv.path),
        "--chdir",
        str(BENCH_DIR),
        "--module",
        opts.app("wsgi"),
        "--master",
        "--processes",
        str(opts.workers),
        "--listen",
        "1024",
        "--die-on-term",
        "--need-app",
        "--disable-logging",
    ]


def _launched(peer: str) -> Builder:
    """A single-process peer started by this suite's launcher, on the WSGI app."""

    def build(venv: Venv, port: int, opts: Options) -> list[str]:
        # Relative, as the apps are: servers start in benchmarks/, and the report's
        # command lines stay free of this checkout's path.
        script = (LAUNCHERS / f"run_{peer}.py").relative_to(BENCH_DIR)
        return [venv.python, str(script), "--host", HOST, "--port", str(port), opts.app("wsgi")]

    return build


ALL_LOOPS = ("asyncio", "uvloop", "rloop")
# A peer's feature that needs a distribution of its own: without it, the feature's
# scenarios leave the peer out (the report says why).
FEATURE_DISTS = {"h3": "aioquic"}

PEERS = [
    Server("granian-wsgi", "wsgi", "granian", _granian("wsgi"), frozenset({"h2"}),
           loops=ALL_LOOPS, runtime_threads=True, runtime_mode=True, quick=True),
    Server("gunicorn-sync", "wsgi", "gunicorn", _gunicorn("sync", "wsgi"), quick=True),
    Server("gunicorn-gthread", "wsgi", "gunicorn",
           _gunicorn("gthread", "wsgi", "--threads", str(THREADS)), quick=True),
    Server("gunicorn-gevent", "wsgi", "gunicorn",
           _gunicorn("gevent", "wsgi", "--worker-connections", str(WORKER_CONNECTIONS)),
           quick=True),
    Server("uwsgi", "wsgi", "uwsgi", _uwsgi),
    # One process and one thread each, no worker processes: the pinned tables only.
    Server("bjoern", "wsgi", "bjoern", _launched("bjoern"), multi_worker=False,
           note="C, libev; single process"),
    Server("fastwsgi", "wsgi", "fastwsgi", _launched("fastwsgi"), multi_worker=False,
           note="C, libuv + llhttp; single process"),
    Server("granian-asgi", "asgi", "granian", _granian("asgi"), frozenset({"h2", "ws"}),
           loops=ALL_LOOPS, runtime_threads=True, runtime_mode=True, quick=True),
    Server("uvicorn-httptools", "asgi", "uvicorn", _uvicorn("httptools"), frozenset({"ws"}),
           loops=("asyncio", "uvloop"), quick=True, note="httptools parser, uvloop"),
    Server("uvicorn-h11", "asgi", "uvicorn", _uvicorn("h11"), frozenset({"ws"}),
           loops=("asyncio", "uvloop"), note="h11 parser, uvloop"),
    # HTTP/3 with aioquic installed (available_peers drops "h3" without it).
    Server("hypercorn", "asgi", "hypercorn", _hypercorn, frozenset({"h2", "h2tls", "h3", "ws"}),
           loops=("asyncio", "uvloop"), tls=True, note="uvloop worker"),
    Server("daphne", "asgi", "daphne", _daphne, frozenset({"ws"}), multi_worker=False,
           note="Twisted; no worker processes, HTTP/2 only over TLS"),
    # Gunicorn's own asyncio worker; h2c as well as HTTP/1.1 on the one port ("both":
    # prior knowledge and upgrade; "prior-knowledge" alone refuses HTTP/1.1).
    Server("gunicorn-asgi", "asgi", "gunicorn",
           _gunicorn_asgi, frozenset({"h2", "ws"}), loops=("asyncio", "uvloop"),
           note="Gunicorn's asgi worker, h2c on"),
    Server("gunicorn-uvicorn", "asgi", "uvicorn-worker",
           _gunicorn("uvicorn_worker.UvicornWorker", "asgi"), frozenset({"ws"}),
           note="Gunicorn arbiter + uvicorn-worker"),
    Server("granian-rsgi", "rsgi", "granian", _granian("rsgi"), frozenset({"h2", "ws"}),
           loops=ALL_LOOPS, runtime_threads=True, runtime_mode=True, quick=True),
]  # fmt: skip


# -- static files: answered from a folder, the app behind never called -----------------
# The folder (payload.static_dir(), written by run.py) on payload.STATIC_ROUTE. Each
# server keeps its own defaults for the rest (Granian adds a one-day Cache-Control,
# nginx and supervise none; nginx's open_file_cache stays off, as supervise and Granian
# look at the file on every request).


def static_folder() -> str:
    """The static folder as servers are given it: relative to benchmarks/, where they
    start, so the report's command lines stay free of this checkout's path."""
    folder = Path(payload.static_dir()).resolve()
    with contextlib.suppress(ValueError):
        return str(folder.relative_to(BENCH_DIR))
    return str(folder)


def _granian_static(venv: Venv, port: int, opts: Options) -> list[str]:
    cmd = _granian("rsgi")(venv, port, opts)
    route = ["--static-path-route", payload.STATIC_ROUTE, "--static-path-mount"]
    return [*cmd[:-1], *route, static_folder(), cmd[-1]]


def _nginx(venv: Venv, port: int, opts: Options) -> list[str]:
    """nginx with a config of its own, written by its launcher under .work/."""
    script = (LAUNCHERS / "run_nginx.py").relative_to(BENCH_DIR)
    cmd = [venv.python, str(script), "--host", HOST, "--port", str(port)]
    cmd += ["--workers", str(opts.workers), "--route", payload.STATIC_ROUTE]
    return [*cmd, "--root", static_folder()]


STATIC_PEERS = [
    Server("granian-static", STATIC, "granian", _granian_static, quick=True,
           note="--static-path-route /static --static-path-mount DIR (RSGI app behind)"),
    Server("nginx", STATIC, "nginx", _nginx, quick=True, system="nginx",
           note="location /static/ { alias DIR/; }, sendfile on, 1 worker process per worker"),
]  # fmt: skip


def system_binary(name: str) -> str | None:
    """A program from PATH, or from the sbin folders a non-root user's PATH lacks."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")


def _system_version(binary: str) -> str:
    """`nginx -v` says `nginx version: nginx/1.22.1` (on stderr)."""
    try:
        done = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    found = re.search(r"/(\d[\w.]*)", done.stderr + done.stdout)
    return found.group(1) if found else "?"


@dataclass(frozen=True)
class WorkerClass:
    """One row of supervise's capability table."""

    interface: str
    module: str  # importable once the worker class exists
    features: frozenset[str]  # what it is documented to speak beyond HTTP/1.1
    extra: tuple[str, ...] = ()
    worker: str = ""  # the -k value when it is not the row's name (-k native serves several)


# Update this table as worker classes land. Features not listed are still probed with one
# real request, so a worker that learns HTTP/2 or WebSocket is measured without edits here.
SUPERVISE_WORKERS = {
    "sync": WorkerClass("wsgi", "supervise.workers.sync", frozenset()),
    "gthread": WorkerClass(
        "wsgi", "supervise.workers.gthread", frozenset(), ("--threads", str(THREADS))
    ),
    "gevent": WorkerClass(
        "wsgi",
        "supervise.workers.ggevent",
        frozenset(),
        ("--worker-connections", str(WORKER_CONNECTIONS)),
    ),
    "asgi": WorkerClass("asgi", "supervise.workers.asgi", frozenset({"ws"})),
    # HTTP/2 over TLS by ALPN on every TLS --bind; HTTP/3 with --quic-bind (rows get "h3"
    # once `supervise --help` lists it).
    "rsgi": WorkerClass("rsgi", "supervise.workers.rsgi", frozenset({"h2", "h2tls", "h3", "ws"})),
    # WSGI on the rsgi worker's tokio + hyper server (HTTP/2 included), the app called on
    # the runtime thread that read the request. One thread (one single-threaded runtime)
    # everywhere, the bjoern model, so it compares with bjoern and fastwsgi per core.
    "native": WorkerClass(
        "wsgi", "supervise.workers.native", frozenset({"h2", "h2tls", "h3"}), ("--threads", "1")
    ),
    # ASGI apps on the same server: the app on the worker's asyncio loop, as with rsgi.
    "native-asgi": WorkerClass(
        "asgi", "supervise.workers.native", frozenset({"h2", "h2tls", "h3"}), worker="native"
    ),
}
# The settings the loops / runtime-threads tables need; used once `supervise --help`
# lists them (Granian's names, which the asgi/rsgi workers adopted).
LOOP_FLAG = "--loop"
RUNTIME_THREADS_FLAG = "--runtime-threads"
RUNTIME_MODE_FLAG = "--runtime-mode"


# Variants measured only when asked for by name (--servers 'supervise-*+metrics'):
# the same worker with Prometheus metrics on, to measure what they cost a request.
METRICS_FLAG = "--metrics-bind"
METRICS_SUFFIX = "+metrics"
# ... and with an access log written to a file (text, or --log-format json).
ACCESS_FLAG = "--access-logfile"
ACCESS_SUFFIX = "+access"
JSON_FLAG = "--log-format"
ACCESS_JSON_SUFFIX = "+access-json"
# supervise serving the static folder itself (the static scenarios' rows), once
# `supervise --help` lists the setting; these worker classes get such a row.
STATIC_FLAG = "--static-map"
STATIC_SUFFIX = "-static"
STATIC_WORKERS = ("rsgi", "native", "gthread")


def _supervise(
    kind: str, wc: WorkerClass, metrics: bool = False, access: str = "", static: bool = False
) -> Builder:
    def build(venv: Venv, port: int, opts: Options) -> list[str]:
        cmd = [venv.bin("supervise"), "-k", wc.worker or kind, "-w", str(opts.workers), *wc.extra]
        if static:
            cmd += [STATIC_FLAG, f"{payload.STATIC_ROUTE}={static_folder()}"]
        if metrics:
            sock = os.path.join(tempfile.gettempdir(), f"supervise-bench-metrics-{port}.sock")
            cmd += [METRICS_FLAG, f"unix:{sock}"]
        if access:
            path = os.path.join(tempfile.gettempdir(), f"supervise-bench-access-{port}.log")
            with contextlib.suppress(OSError):
                os.unlink(path)  # a run's lines must not fill the disk run after run
            cmd += [ACCESS_FLAG, path]
            if access == "json":
                cmd += [JSON_FLAG, "json"]
        if opts.loop:
            cmd += [LOOP_FLAG, opts.loop]
        if opts.runtime_threads:
            cmd += [RUNTIME_THREADS_FLAG, str(opts.runtime_threads)]
        if opts.runtime_mode:
            cmd += [RUNTIME_MODE_FLAG, opts.runtime_mode]
        cmd += _tls_args(opts, port)
        return [*cmd, "-b", f"{HOST}:{port}", "--log-level", "warning", opts.app(wc.interface)]

    return build


def supervise_servers(venv: Venv, log) -> list[Server]:
    """The supervise worker classes this venv's build provides, probed without serving."""
    script = venv.bin("supervise")
    help_text = ""
    try:
        done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=30)
        help_text = done.stdout + done.stderr
        if done.returncode != 0:
            log(f"  supervise --help failed ({done.returncode}): {help_text.strip()[-300:]}")
            return []
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"  supervise CLI not usable: {exc}")
        return []
    code = (
        "import importlib.util, sys\n"
        "for m in sys.argv[1:]:\n"
        "    try: ok = importlib.util.find_spec(m) is not None\n"
        "    except ImportError: ok = False\n"
        "    print(m, ok)\n"
    )
    modules = [wc.module for wc in SUPERVISE_WORKERS.values()]
    out = subprocess.run([venv.python, "-c", code, *modules], capture_output=True, text=True)
    present = {line.split()[0] for line in out.stdout.splitlines() if line.endswith("True")}
    return supervise_rows(help_text, present)


def supervise_rows(help_text: str, present: set[str]) -> list[Server]:
    """supervise's rows: one per worker class whose module is `present`, with the
    tables' settings where `help_text` (its --help) lists them, and the variants."""
    servers = []
    for kind, wc in SUPERVISE_WORKERS.items():
        if wc.module not in present:
            continue
        async_worker = wc.interface in ("asgi", "rsgi")
        if QUIC_FLAG not in help_text:
            wc = replace(wc, features=wc.features - {"h3"})
        servers.append(
            Server(
                f"supervise-{kind}",
                wc.interface,
                DISTRIBUTION,
                _supervise(kind, wc),
                wc.features,
                probe_features=True,
                tls=True,
                loops=ALL_LOOPS if async_worker and LOOP_FLAG in help_text else (),
                runtime_threads=wc.interface == "rsgi" and RUNTIME_THREADS_FLAG in help_text,
                runtime_mode=wc.interface == "rsgi" and RUNTIME_MODE_FLAG in help_text,
                quick=True,
                note=f"-k {wc.worker or kind} {' '.join(wc.extra)}".strip(),
            )
        )
        if METRICS_FLAG in help_text:
            servers.append(
                Server(
                    f"supervise-{kind}{METRICS_SUFFIX}",
                    wc.interface,
                    DISTRIBUTION,
                    _supervise(kind, wc, metrics=True),
                    wc.features,
                    probe_features=True,
                    tls=True,
                    explicit=True,
                    note=" ".join(["-k", wc.worker or kind, *wc.extra, METRICS_FLAG, "unix:..."]),
                )
            )
        for suffix, access in ((ACCESS_SUFFIX, "text"), (ACCESS_JSON_SUFFIX, "json")):
            if access == "json" and JSON_FLAG not in help_text:
                continue
            extra = f"{ACCESS_FLAG} FILE" + (f" {JSON_FLAG} json" if access == "json" else "")
            servers.append(
                Server(
                    f"supervise-{kind}{suffix}",
                    wc.interface,
                    "supervise",
                    _supervise(kind, wc, access=access),
                    wc.features,
                    probe_features=True,
                    tls=True,
                    explicit=True,
                    note=f"-k {wc.worker or kind} {' '.join(wc.extra)} {extra}".replace("  ", " "),
                )
            )
        if kind in STATIC_WORKERS and STATIC_FLAG in help_text:
            flag = f"{STATIC_FLAG} {payload.STATIC_ROUTE}=DIR"
            servers.append(
                Server(
                    f"supervise-{kind}{STATIC_SUFFIX}",
                    STATIC,
                    DISTRIBUTION,
                    _supervise(kind, wc, static=True),
                    quick=True,
                    note=f"-k {wc.worker or kind} {' '.join(wc.extra)} {flag}".replace("  ", " "),
                )
            )
    return servers


def every_row() -> list[Server]:
    """Every server the suite knows, as if every peer installed and supervise's build had
    every worker class and setting: what `--list` plans and estimates without venvs."""
    flags = [LOOP_FLAG, RUNTIME_THREADS_FLAG, RUNTIME_MODE_FLAG, METRICS_FLAG, JSON_FLAG, QUIC_FLAG]
    modules = {wc.module for wc in SUPERVISE_WORKERS.values()}
    return [*PEERS, *STATIC_PEERS, *supervise_rows(" ".join([*flags, STATIC_FLAG]), modules)]


def available_peers(venv: Venv) -> tuple[list[Server], dict[str, str]]:
    """Peers whose distribution is installed in this venv, and why the others are not."""
    peers, missing = [], {}
    for server in PEERS:
        if not venv.has(server.dist):
            missing[server.name] = venv.failed.get(server.dist, f"{server.dist} not installed")
            continue
        loops = tuple(loop for loop in server.loops if loop != "rloop" or venv.has("rloop"))
        if loops != server.loops:
            server = replace(server, loops=loops)
        for feature, dist in FEATURE_DISTS.items():
            if feature in server.features and not venv.has(dist):
                server = replace(server, features=server.features - {feature})
                why = venv.failed.get(dist, f"{dist} not installed")
                missing[f"{server.name} ({feature})"] = why
        peers.append(server)
    for server in STATIC_PEERS:
        if server.system:
            binary = system_binary(server.system)
            if binary is None:
                missing[server.name] = (
                    f"{server.system} not found (apt-get install {server.system})"
                )
            else:
                peers.append(replace(server, version=_system_version(binary)))
        elif venv.has(server.dist):
            peers.append(server)
        else:
            missing[server.name] = venv.failed.get(server.dist, f"{server.dist} not installed")
    return peers, missing
