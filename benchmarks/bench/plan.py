"""Which runs make up --quick and --full: scenarios, servers, and the dimension tables."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace

from bench.scenarios import BY_NAME, SCENARIOS, STATIC, Scenario
from bench.servers import Options, Server

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
LOOPS = ("asyncio", "uvloop", "rloop")
RUNTIME_MODES = ("st", "mt")
RUNTIME_THREADS = (1, 2, 4)
# The deploy table's scenarios: the ones the project's throughput targets name.
DEPLOY_SCENARIOS = ("get-4b", "post-10k", "json")
# The many-core part's: the shared many-core recipe's GET 4 B and POST echo 1 KiB. The
# deploy table runs them too when it is split (server and load on core sets of their own)
# and the profile names them (the manycore part does).
MANYCORE_SCENARIOS = ("get-4b", "post-1k")
# Scenarios of that part alone: --full keeps the scenarios it had.
PART_ONLY_SCENARIOS = ("post-1k",)
# The Python table: bytes, str and echo on each interface, as Granian's table has them.
PYTHON_SCENARIOS = ("get-4b", "get-str", "post-10k")
# The event-loop table: a 10 KiB response and a 10 KiB body read in chunks.
LOOP_SCENARIOS = ("get-10k", "post-10k")
# The memory table's worker counts: what each extra worker process costs.
MEMORY_WORKERS = (1, 2, 4)

# `main` is the pinned one-worker table (per-core cost); `deploy` runs the way users
# deploy (workers = cores, nothing pinned); each dimension table varies one thing, pinned,
# on the scenarios Granian's tables use (GET 4 B unless said above).
TABLES = {
    "main": "pinned, one worker: each server's default configuration (per-core cost)",
    "deploy": "workers = cores, server and load generator unpinned (what users get); with "
    "--server-cpus/--load-cpus, each on its own set of cores",
    "workers": "2 worker processes (both on the one server core)",
    "python": "Python versions: bytes, str and echo",
    "loops": "event loops (ASGI and RSGI servers): GET 10 KiB and POST echo 10 KiB",
    "threads": "runtime mode and threads (RSGI servers)",
    "memory": "memory per worker count (1, 2, 4 workers): RSS and PSS, idle and under load",
}


@dataclass(frozen=True)
class Profile:
    scenarios: tuple[str, ...]
    levels: tuple[int, ...]
    duration: float
    warmup: float
    tables: tuple[str, ...]
    quick_servers_only: bool
    noise_repeats: int


QUICK = Profile(
    scenarios=("get-4b", "get-10k", "post-10k", "json", "ws-echo"),
    levels=(128,),
    duration=5.0,
    warmup=1.0,
    tables=("main",),
    quick_servers_only=True,
    noise_repeats=3,
)
FULL = Profile(
    scenarios=tuple(s.name for s in SCENARIOS if s.name not in PART_ONLY_SCENARIOS),
    levels=(64, 128, 256),
    duration=10.0,
    warmup=3.0,
    tables=tuple(TABLES),
    quick_servers_only=False,
    noise_repeats=5,
)


# The published comparison, table by table: each part is one command
# (`run.py --part NAME`) that runs in under PART_LIMIT_MIN minutes on this 2-core machine,
# and together they cover every table. Three levels find each server's best concurrency;
# 5 s per level keeps the parts short (the noise section says what that costs).
PUBLISHED = Profile(
    scenarios=(),
    levels=(64, 128, 256),
    duration=5.0,
    warmup=2.0,
    tables=(),
    quick_servers_only=False,
    noise_repeats=5,
)
PART_LIMIT_MIN = 45


@dataclass(frozen=True)
class Part:
    what: str
    tables: tuple[str, ...]
    scenarios: tuple[str, ...] = ()  # of the main and deploy tables; the others have theirs
    interfaces: tuple[str, ...] = ("wsgi", "asgi", "rsgi")  # servers of these interfaces
    pythons: tuple[str, ...] = ()  # the Python table's versions
    servers: tuple[str, ...] = ()  # only these servers (globs), when not every one
    # The deploy table on two core sets even without --server-cpus/--load-cpus (the
    # cores split in halves): a part for machines with many cores.
    split: bool = False


_SERVED = ("get-4b", "post-10k", "json", "file")
# HTTP/3 and, for comparison, the same requests over HTTP/2 with TLS (h2load, ALPN h2),
# on the servers that serve HTTP/3: supervise's rsgi and native workers (its WSGI and
# ASGI apps) and Hypercorn (aioquic).
HTTP3_SCENARIOS = ("h2tls-get", "h2tls-post", "h3-get", "h3-post")
HTTP3_SERVERS = ("supervise-rsgi", "supervise-native", "supervise-native-asgi", "hypercorn")
# The many-core table's rows: the shared many-core recipe's servers.
MANYCORE_SERVERS = (
    "supervise-gthread", "supervise-gevent", "supervise-native", "supervise-asgi",
    "supervise-native-asgi", "supervise-rsgi", "granian-wsgi", "granian-asgi", "granian-rsgi",
    "uvicorn-httptools", "gunicorn-gthread",
)  # fmt: skip
PARTS = {
    "versus-wsgi": Part("one worker, WSGI servers: GET, POST echo, JSON, file", ("main",),
                        _SERVED, ("wsgi",)),
    "versus-asgi": Part("one worker, ASGI servers: the same, GET 10 KiB and long I/O (10, 100 ms)",
                        ("main",), (*_SERVED, "get-10k", "io10", "io100"), ("asgi",)),
    "versus-rsgi": Part("one worker, RSGI servers: the same as ASGI", ("main",),
                        (*_SERVED, "get-10k", "io10", "io100"), ("rsgi",)),
    "versus-h2-ws": Part("one worker: HTTP/2 GET and POST, WebSocket echo and broadcast",
                         ("main",), ("h2-get", "h2-post", "ws-echo", "ws-broadcast")),
    "deploy": Part("workers = cores, unpinned", ("deploy",), DEPLOY_SCENARIOS),
    "manycore": Part("many cores: server on --server-cpus, wrk (a thread per core) on "
                     "--load-cpus (default: halves): GET 4 B, POST echo 1 KiB", ("deploy",),
                     MANYCORE_SCENARIOS, servers=MANYCORE_SERVERS, split=True),
    "static": Part("one worker: static files, GET 1 KiB and 1 MiB, supervise's --static-map "
                   "against Granian's static route and nginx", ("main",),
                   ("static-1k", "static-1m"), (STATIC,)),
    "scaling": Part("1 and 2 workers; memory with 1, 2 and 4 workers", ("workers", "memory")),
    "runtime": Part("runtime mode and threads; event loops", ("threads", "loops")),
    "http3": Part("one worker: HTTP/3 GET and POST echo 10 KiB (h3load) against the same "
                  "servers' HTTP/2 over TLS", ("main",), HTTP3_SCENARIOS, servers=HTTP3_SERVERS),
    **{
        f"python-{py}": Part(f"Python {py}: bytes, str, echo", ("python",), pythons=(py,))
        for py in PYTHONS
    },
}  # fmt: skip


def part_servers(part: Part, servers: list[Server]) -> list[Server]:
    """The servers of the part's interfaces (and of its names, when it names some)."""
    return [
        s
        for s in servers
        if s.interface in part.interfaces
        and (not part.servers or any(fnmatch.fnmatch(s.name, p) for p in part.servers))
    ]


def part_profile(part: Part) -> Profile:
    return replace(PUBLISHED, scenarios=part.scenarios, tables=part.tables)


def estimate_s(
    points: list[Point], servers: dict[str, list[Server]], profile: Profile, *, rounds: int = 1
) -> float:
    """Seconds the plan takes: each applicable server's start, warm-up and levels, the
    noise measure, and a margin."""
    total = 0.0
    for point in points:
        levels = len(point.scenario.levels(profile.levels))
        per_server = 1.5 + profile.warmup + levels * (profile.duration + 0.5)
        count = sum(1 for s in servers.get(point.python, ()) if applicable(point, s))
        # Several workers: the runner waits for the others to boot after the first answers.
        total += count * (per_server + (2.0 if point.options.workers > 1 else 0.0))
    return total * rounds + profile.noise_repeats * profile.duration + 10


@dataclass(frozen=True)
class Point:
    """One row group of a table: every applicable server runs it in turn."""

    table: str
    scenario: Scenario
    python: str
    options: Options = field(default_factory=Options)

    @property
    def key(self) -> str:
        return f"{self.table}/{self.scenario.name}/py{self.python}/{self.options.label()}"


def build(
    profile: Profile,
    scenarios: list[str],
    tables: list[str],
    pythons: list[str],
    default_py: str,
    *,
    cores: int = 2,
    split: bool = False,
) -> list[Point]:
    """The plan's points; `cores` is the deploy table's worker count (the cores the
    servers may use); `split`: the deploy table's server and load generator each on a
    core set of its own."""
    points: list[Point] = []
    if "main" in tables:
        points += [Point("main", BY_NAME[name], default_py) for name in scenarios]
    if "deploy" in tables:
        deploy = Options(workers=cores, pinned=False, split=split)
        names = (*DEPLOY_SCENARIOS, *(MANYCORE_SCENARIOS if split else ()))
        points += [
            Point("deploy", BY_NAME[name], default_py, deploy)
            for name in dict.fromkeys(names)
            if name in scenarios
        ]
    base = BY_NAME["get-4b"]
    if "workers" in tables:
        points.append(Point("workers", base, default_py, Options(workers=2)))
    if "python" in tables:
        points += [
            Point("python", BY_NAME[name], py) for name in PYTHON_SCENARIOS for py in pythons
        ]
    if "loops" in tables:
        points += [
            Point("loops", BY_NAME[name], default_py, Options(loop=loop))
            for name in LOOP_SCENARIOS
            for loop in LOOPS
        ]
    if "threads" in tables:
        points += [
            Point("threads", base, default_py, Options(runtime_threads=n, runtime_mode=mode))
            for mode in RUNTIME_MODES
            for n in RUNTIME_THREADS
        ]
    if "memory" in tables:
        points += [Point("memory", base, default_py, Options(workers=n)) for n in MEMORY_WORKERS]
    return points


def applicable(point: Point, server: Server) -> bool:
    """Static applicability; features a supervise worker may have are probed at run time."""
    scenario = point.scenario
    if server.interface not in scenario.interfaces:
        return False
    if scenario.needs and scenario.needs not in server.features and not server.probe_features:
        return False
    # supervise stays in the dimension tables even before it has the setting, so the
    # report shows it as skipped (with the reason) rather than silently absent.
    if point.table == "loops":
        async_server = server.interface in ("asgi", "rsgi")
        return async_server and (bool(server.loops) or server.is_supervise)
    if point.table == "threads":
        return server.interface == "rsgi" and (server.runtime_threads or server.is_supervise)
    if point.table in ("workers", "deploy"):
        return server.multi_worker
    if point.table == "memory":
        return point.options.workers == 1 or server.multi_worker
    return point.options == Options()


def server_options(point: Point) -> Options:
    """What the server is started with for this point: the table's options, plus TLS
    (the suite's certificate) for a scenario over https://, and --quic-bind for HTTP/3."""
    scenario = point.scenario
    if not scenario.secure:
        return point.options
    return replace(point.options, tls=True, quic=scenario.protocol == "h3")


def select_servers(servers: list[Server], patterns: list[str], quick_only: bool) -> list[Server]:
    chosen = []
    for server in servers:
        if patterns and not any(fnmatch.fnmatch(server.name, p) for p in patterns):
            continue
        if server.explicit and not any(
            "+" in p and fnmatch.fnmatch(server.name, p) for p in patterns
        ):
            continue
        if quick_only and not server.quick and not patterns:
            continue
        chosen.append(server)
    return chosen
