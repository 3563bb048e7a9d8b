"""Load generators on the load core (every core in unpinned tables): wrk (HTTP/1.1),
h2load (HTTP/2, h2c or over TLS), h3load (HTTP/3: benchmarks/h3load, Go, quic-go) and
wsload (WebSocket: benchmarks/wsload, Go); the Go ones are built here on first use.

Each returns the same `Load` record, with the counts that tell whether the figure can be
trusted (non-2xx responses, socket errors, short responses) next to the throughput.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.peers import BENCH_DIR
from bench.scenarios import Scenario

WRK_SCRIPT = BENCH_DIR / "lua" / "report.lua"
# The wrk binary: the one on PATH unless run.py's --wrk names another (the many-core
# bundle's, whose libraries sit beside it, on a machine with no network to install one).
WRK = "wrk"
WSLOAD_SOURCE = BENCH_DIR / "wsload"
WSLOAD = BENCH_DIR / ".work" / "wsload"
H3LOAD_SOURCE = BENCH_DIR / "h3load"
H3LOAD = BENCH_DIR / ".work" / "h3load"
WRK_TIMEOUT = "4s"
H2_STREAMS = 10  # concurrent streams per h2load connection; connections = level / this
# The same for h3load's QUIC connections, so HTTP/3 and HTTP/2 over TLS get the same
# shape of load: at c=128, 12 connections with 10 requests in flight on each. h3load's
# own request timeout is WRK_TIMEOUT's 4 s (its default).
H3_STREAMS = H2_STREAMS

INSTALL_HINTS = {
    "wrk": "apt-get update && apt-get install -y wrk",
    "h2load": "apt-get update && apt-get install -y nghttp2-client",
    "nghttp": "apt-get update && apt-get install -y nghttp2-client",
    "taskset": "apt-get update && apt-get install -y util-linux",
    "go": "https://go.dev/doc/install (wsload and h3load, the WebSocket and HTTP/3 load "
    "generators, are Go)",
    "openssl": "apt-get update && apt-get install -y openssl (the TLS scenarios' certificate)",
}


@dataclass
class Load:
    tool: str
    connections: int
    requests: int = 0
    duration_s: float = 0.0
    rps: float = 0.0
    latency_avg_ms: float = 0.0
    latency_max_ms: float = 0.0
    # 0.0: not measured (results from before p50 was kept, broadcast runs). h2load's come
    # from its per-request log (--log-file), the others' from their JSON summary.
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    non2xx: int = 0
    socket_errors: int = 0
    bytes_per_request: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    # WebSocket broadcast: send, receive and combined messages/s (rps is combined).
    broadcast: dict[str, float] = field(default_factory=dict)
    problem: str = ""  # set when the figure must not be trusted
    # CPU the load generator used, in % of one core: near 100 means the client, not the
    # server, set the pace, and the figure is a lower bound for the server.
    client_cpu_pct: float = 0.0
    # wrk's and h2load's -t: one per load core when the load generator has cores of its
    # own (the deploy table's split), else 1; client_cpu_pct is then out of this many cores.
    threads: int = 1

    @property
    def clean(self) -> bool:
        return not self.problem and self.non2xx == 0 and self.socket_errors == 0

    def to_dict(self) -> dict:
        return asdict(self)


def missing_tools(protocols: set[str]) -> dict[str, str]:
    """Tools the requested scenarios need that are not installed -> how to install them.
    `protocols`: the scenarios' protocols, and "tls" when one of them is over TLS."""
    needed = {"taskset"}
    if "h1" in protocols:
        needed.add(WRK)
    if "h2" in protocols:
        needed |= {"h2load", "nghttp"}
    if "ws" in protocols or "h3" in protocols:
        needed.add("go")
    if "tls" in protocols or "h3" in protocols:
        needed.add("openssl")
    return {
        tool: INSTALL_HINTS.get(tool, "an executable file at that path")
        for tool in sorted(needed)
        if not shutil.which(tool)
    }


def tool_versions() -> dict[str, str]:
    versions = {}
    for tool, binary, args in (("wrk", WRK, ["-v"]), ("h2load", "h2load", ["--version"])):
        if shutil.which(binary):
            out = subprocess.run([binary, *args], capture_output=True, text=True)
            text = (out.stdout + out.stderr).strip().splitlines()
            versions[tool] = text[0] if text else "?"
    return versions


def _from_json(tool: str, connections: int, output: str) -> Load:
    for line in output.splitlines():
        if line.startswith("BENCH_JSON "):
            data = json.loads(line[len("BENCH_JSON ") :])
            break
    else:
        return Load(tool, connections, problem=f"no result from {tool}: {output.strip()[-300:]}")
    errors = data["errors"]
    lat = data["latency_us"]
    duration = data["duration_us"] / 1e6
    requests = data["requests"]
    rps = data.get("rps") or (requests / duration if duration else 0.0)
    return Load(
        tool,
        connections,
        requests=requests,
        duration_s=duration,
        rps=rps,
        latency_avg_ms=lat["mean"] / 1000,
        latency_max_ms=lat["max"] / 1000,
        latency_p50_ms=lat.get("p50", 0) / 1000,
        latency_p99_ms=lat["p99"] / 1000,
        # wrk counts a status >= 400 as a "status" error: that is our non-2xx count (the
        # apps never redirect, so 3xx cannot hide there).
        non2xx=errors["status"],
        socket_errors=errors["connect"] + errors["read"] + errors["write"] + errors["timeout"],
        bytes_per_request=data["bytes"] / requests if requests else 0.0,
        errors=errors,
        broadcast=data.get("broadcast") or {},
    )


def _pinned(cpus: str, cmd: list[str]) -> list[str]:
    """`cpus` is a taskset list: "1" (the load core) or every core (unpinned tables). The
    harness itself is pinned to the load core and children inherit that, so unpinned
    means naming every core, not leaving taskset out."""
    return ["taskset", "-c", cpus, *cmd]


def _execute(cmd: list[str], duration: float) -> tuple[str, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        return "", f"{cmd[3]} did not finish within {duration + 60:.0f} s"
    if done.returncode != 0:
        return done.stdout, f"{cmd[3]} exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return done.stdout, ""


def wrk(
    url: str, scenario: Scenario, connections: int, duration: float, cpus: str, threads: int = 1
) -> Load:
    # wrk refuses more threads than connections.
    threads = max(1, min(threads, connections))
    cmd = _pinned(cpus, [WRK, f"-t{threads}", f"-c{connections}", f"-d{duration:g}s"])
    cmd += ["--timeout", WRK_TIMEOUT, "-s", str(WRK_SCRIPT), url, "--", scenario.method]
    if scenario.method == "POST":
        cmd.append(str(scenario.body_size))
    out, problem = _execute(cmd, duration)
    load = _from_json("wrk", connections, out)
    load.problem = load.problem or problem
    load.threads = threads
    return load


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0


def parse_h2load(output: str, connections: int) -> Load:
    load = Load("h2load", connections)
    finished = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", output)
    counts = re.search(
        r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
        r"(\d+) errored, (\d+) timeout",
        output,
    )
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
    timing = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", output)
    data = re.search(r"traffic: .*?, \S+ \((\d+)\) data", output)
    if not (finished and counts and codes):
        load.problem = f"unparsable h2load output: {output.strip()[-300:]}"
        return load
    done = int(counts.group(3))
    load.duration_s = float(finished.group(1))
    load.rps = float(finished.group(2))
    load.requests = done
    load.non2xx = int(codes.group(2)) + int(codes.group(3)) + int(codes.group(4))
    load.socket_errors = int(counts.group(6)) + int(counts.group(7))
    load.errors = {
        "failed": int(counts.group(5)),
        "errored": int(counts.group(6)),
        "timeout": int(counts.group(7)),
    }
    if timing:
        load.latency_max_ms = _ms(timing.group(2))
        load.latency_avg_ms = _ms(timing.group(3))
    if data and done:
        load.bytes_per_request = int(data.group(1)) / done
    return load


def latency_percentiles(log: Path) -> tuple[float, float]:
    """p50 and p99 in ms from h2load's --log-file (start µs, status, µs to the end of the
    response; status -1 for a failed stream, left out): h2load's own summary gives only
    min, max, mean and sd. The same rank as the suite's Go load generators take."""
    samples = []
    try:
        with log.open() as rows:
            for row in rows:
                fields = row.split("\t")
                if len(fields) >= 3 and fields[1] != "-1":
                    samples.append(int(fields[2]))
    except (OSError, ValueError):
        return 0.0, 0.0
    if not samples:
        return 0.0, 0.0
    samples.sort()

    def rank(pct: float) -> float:
        return samples[min(len(samples) - 1, int(len(samples) * pct / 100))] / 1000

    return rank(50), rank(99)


def h2load(
    url: str, scenario: Scenario, connections: int, duration: float, cpus: str, threads: int = 1
) -> Load:
    clients = max(1, connections // H2_STREAMS)
    # h2load refuses more threads than clients.
    threads = max(1, min(threads, clients))
    log = BENCH_DIR / ".work" / f"h2load-{os.getpid()}.tsv"
    log.parent.mkdir(exist_ok=True)
    cmd = _pinned(cpus, ["h2load", f"-t{threads}", "-c", str(clients), "-m", str(H2_STREAMS)])
    cmd += ["-D", f"{duration:g}", "--log-file", str(log)]
    if scenario.method == "POST":
        body = BENCH_DIR / ".work" / f"h2-body-{scenario.body_size}.bin"
        body.parent.mkdir(exist_ok=True)
        body.write_bytes(scenario.request_body())
        cmd += ["-d", str(body)]
    out, problem = _execute([*cmd, url], duration)
    load = parse_h2load(out, connections)
    load.problem = load.problem or problem
    load.latency_p50_ms, load.latency_p99_ms = latency_percentiles(log)
    log.unlink(missing_ok=True)
    load.threads = threads
    return load


def _go_binary(source: Path, binary: Path) -> Path:
    """A Go load generator of this suite, rebuilt when its source is newer than the binary."""
    sources = [*source.glob("*.go"), *source.glob("go.*")]
    newest = max(p.stat().st_mtime for p in sources)
    if not binary.exists() or binary.stat().st_mtime < newest:
        binary.parent.mkdir(exist_ok=True)
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=source, check=True, timeout=300)
    return binary


def wsload_binary() -> Path:
    return _go_binary(WSLOAD_SOURCE, WSLOAD)


def h3load_binary() -> Path:
    """quic-go's HTTP/3 client (go.sum pins it; the first build fetches the module unless
    Go's module cache has it)."""
    return _go_binary(H3LOAD_SOURCE, H3LOAD)


def broadcast_messages(duration: float) -> int:
    """Messages each broadcast client sends: Granian's 2500 at the published 5 s."""
    return max(50, int(500 * duration))


def wsload(url: str, scenario: Scenario, connections: int, duration: float, cpus: str) -> Load:
    cmd = _pinned(cpus, [str(wsload_binary()), "-url", url, "-mode", scenario.ws_mode])
    cmd += ["-connections", str(connections), "-duration", f"{duration:g}"]
    cmd += ["-messages", str(broadcast_messages(duration))]
    # A broadcast stops at 4 x duration however far it got.
    out, problem = _execute(cmd, 4 * duration)
    load = _from_json("wsload", connections, out)
    load.problem = load.problem or problem
    return load


def h3load(url: str, scenario: Scenario, connections: int, duration: float, cpus: str) -> Load:
    """HTTP/3: `connections` requests in flight, as level / H3_STREAMS QUIC connections
    (each its own UDP socket) of H3_STREAMS streams, the certificate not verified."""
    clients = max(1, connections // H3_STREAMS)
    cmd = _pinned(cpus, [str(h3load_binary()), "-url", url, "-insecure"])
    cmd += ["-c", str(clients), "-m", str(H3_STREAMS), "-d", f"{duration:g}"]
    if scenario.method == "POST":
        cmd += ["-method", "POST", "-body-size", str(scenario.body_size)]
    out, problem = _execute(cmd, duration)
    load = _from_json("h3load", connections, out)
    load.problem = load.problem or problem
    return load


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def run(
    base: str,
    scenario: Scenario,
    connections: int,
    duration: float,
    cpus: str,
    *,
    threads: int = 1,
) -> Load:
    """One load of `duration` seconds at `connections` against the server at `base`, by
    a load generator on `cpus`; wrk and h2load with `threads` threads (the Go ones use
    every core of `cpus` anyway)."""
    # Load generators run one at a time as our children: the children's CPU time around
    # one run is that load generator's.
    before = _children_cpu()
    load = _dispatch(base, scenario, connections, duration, cpus, threads)
    if load.duration_s:
        load.client_cpu_pct = (_children_cpu() - before) / load.duration_s * 100
    return load


def _dispatch(
    base: str, scenario: Scenario, connections: int, duration: float, cpus: str, threads: int = 1
) -> Load:
    if scenario.protocol == "ws":
        url = base.replace("http://", "ws://") + scenario.path
        load = wsload(url, scenario, connections, duration, cpus)
        # Go's runtime runs on every core it is given: as many as wrk's threads would.
        load.threads = threads
        return load
    if scenario.protocol == "h2":
        return h2load(base + scenario.path, scenario, connections, duration, cpus, threads)
    if scenario.protocol == "h3":
        # h3load counts body bytes only (wrk: the whole response), so the same check holds.
        load = h3load(base + scenario.path, scenario, connections, duration, cpus)
        load.threads = threads
    else:
        load = wrk(base + scenario.path, scenario, connections, duration, cpus, threads)
    expected = scenario.expected_body()
    if load.requests and expected is not None and load.bytes_per_request < len(expected):
        load.problem = load.problem or (
            f"short responses: {load.bytes_per_request:.0f} B per response, "
            f"body alone is {len(expected)} B"
        )
    return load
