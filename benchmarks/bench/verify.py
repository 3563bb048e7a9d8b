"""One real request per server and scenario, checked byte for byte, before any load.

The load generators only count statuses; this is where a server that answers fast but
wrong is caught. Returns '' when the answer is right, else what was wrong.
"""

from __future__ import annotations

import http.client
import ssl
import subprocess
import tempfile
from pathlib import Path

from bench import loadgen
from bench.scenarios import Scenario


def _describe(got: bytes, want: bytes) -> str:
    return f"body of {len(got)} B {got[:40]!r}..., expected {len(want)} B {want[:40]!r}..."


def _unverified() -> ssl.SSLContext:
    """The suite's self-signed certificate is not checked (neither do the load generators)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def http1(host: str, port: int, scenario: Scenario) -> str:
    want = scenario.expected_body() or b""
    if scenario.secure:
        conn = http.client.HTTPSConnection(host, port, timeout=15, context=_unverified())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=15)
    try:
        body = scenario.request_body() if scenario.method == "POST" else None
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        conn.request(scenario.method, scenario.path, body=body, headers=headers)
        resp = conn.getresponse()
        got = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    if resp.status != 200:
        return f"status {resp.status}, expected 200"
    return "" if got == want else _describe(got, want)


def http2(host: str, port: int, scenario: Scenario) -> str:
    """nghttp speaks h2c with prior knowledge, as h2load does under load, or ALPN h2 over
    TLS (https://; it checks no certificate)."""
    want = scenario.expected_body() or b""
    cmd = ["nghttp", "--no-dep", "-t", "10"]
    if scenario.method == "POST":
        body = loadgen.BENCH_DIR / ".work" / f"h2-body-{scenario.body_size}.bin"
        body.parent.mkdir(exist_ok=True)
        body.write_bytes(scenario.request_body())
        cmd += ["-d", str(body)]
    try:
        done = subprocess.run(
            [*cmd, f"{_scheme(scenario)}://{host}:{port}{scenario.path}"],
            capture_output=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        return "nghttp timed out (no HTTP/2 answer)"
    if done.returncode != 0:
        return f"nghttp exited {done.returncode}: {done.stderr.decode(errors='replace')[-200:]}"
    if not done.stdout and done.stderr:
        # nghttp exits 0 when the server does not speak HTTP/2; it says so on stderr.
        return done.stderr.decode(errors="replace").strip()[-200:]
    # nghttp prints only the body: an error page would differ from the expected bytes.
    return "" if done.stdout == want else _describe(done.stdout, want)


def _scheme(scenario: Scenario) -> str:
    return "https" if scenario.secure else "http"


def http3(host: str, port: int, scenario: Scenario) -> str:
    """h3load's one request over HTTP/3 (certificate unchecked), its body checked here."""
    want = scenario.expected_body() or b""
    url = f"https://{host}:{port}{scenario.path}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "body"
        cmd = [str(loadgen.h3load_binary()), "-url", url, "-insecure", "-verify", "-o", str(out)]
        if scenario.method == "POST":
            cmd += ["-method", "POST", "-body-size", str(scenario.body_size)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return "h3load -verify timed out (no HTTP/3 answer)"
        if done.returncode != 0:
            # h3load says why: a status ("status 404, ...") or the QUIC error.
            return (done.stdout + done.stderr).strip()[-300:] or f"h3load exited {done.returncode}"
        got = out.read_bytes()
    return "" if got == want else _describe(got, want)


def websocket(host: str, port: int, scenario: Scenario) -> str:
    url = f"ws://{host}:{port}{scenario.path}"
    cmd = [str(loadgen.wsload_binary()), "-url", url, "-verify"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "websocket check timed out"
    return "" if done.returncode == 0 else (done.stdout + done.stderr).strip()[-300:]


def check(host: str, port: int, scenario: Scenario) -> str:
    if scenario.protocol == "ws":
        return websocket(host, port, scenario)
    if scenario.protocol == "h2":
        return http2(host, port, scenario)
    if scenario.protocol == "h3":
        return http3(host, port, scenario)
    return http1(host, port, scenario)
