"""h2spec 2.2.1 (145 HTTP/2 conformance cases) against `supervise -k rsgi`
and against the engine (`-k native`) serving a WSGI and an ASGI app, over h2c
(prior knowledge) and over TLS (h2 through ALPN). The engine shares the rsgi
worker's HTTP/2 server, but its app side (the WSGI call on the runtime thread,
ASGI's bridge) answers the streams, so each interface runs the cases.

h2spec is a Go program: it is installed once with `go install` into a cache
directory outside the repository, and the test is skipped, with the reason,
where Go is missing or the install fails. The passing counts are pinned:
a change either way must be looked at.

Peers on the same cases (../shared/conformance/README.md): Hypercorn 144/145
h2c and 145/145 over TLS; Granian 144/145. The case everyone fails in clear
text is http2/3.5/2 (an invalid preface): a server that also speaks HTTP/1.1
on the port takes those bytes for an HTTP/1.1 request and answers 400.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import trustme

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "supervise" / "h2spec"
BINARY = CACHE / "h2spec"
MODULE = "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"
CASES = 145
# (worker class, app, path): each app reads the whole request body before
# answering, as the flow-control cases need a body to send and a stream still
# open.
SERVED = {
    "rsgi": ("rsgi", "rsgi_apps:read_then_hello", "/"),
    "native-wsgi": ("native", "wsgi_apps:digest", "/"),
    "native-asgi": ("native", "asgi_apps:app", "/scope/h2spec"),
}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def h2spec() -> Path:
    """The h2spec binary; installed into the cache when missing."""
    if BINARY.exists():
        return BINARY
    go = shutil.which("go")
    if go is None:
        pytest.skip("h2spec needs Go to install it (go install ...h2spec@v2.2.1)")
    CACHE.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOBIN=str(CACHE), GOFLAGS="-modcacherw")
    try:
        install = subprocess.run(
            [go, "install", MODULE], capture_output=True, text=True, timeout=400, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.skip("installing h2spec took more than 400 s")
    if install.returncode != 0 or not BINARY.exists():
        pytest.skip(f"cannot install h2spec: {install.stderr[-500:]}")
    return BINARY


def results(report: Path) -> tuple[list[str], list[str]]:
    """(passed, failed) case ids, as h2spec numbers them (`http2/3.5/2`)."""
    passed, failed = [], []
    for suite in ET.parse(report).getroot().iter("testsuite"):
        for i, case in enumerate(suite.iter("testcase"), 1):
            ident = f"{suite.get('package')}/{i}"
            bad = case.find("failure") is not None or case.find("error") is not None
            (failed if bad else passed).append(ident)
    return passed, failed


def run_h2spec(
    binary: Path, server, report: Path, path: str, *tls: str
) -> tuple[list[str], list[str]]:
    cmd = [str(binary), "-h", server.host, "-p", str(server.port), "-o", "3", "-j", str(report)]
    cmd += ["-P", path]
    out = subprocess.run([*cmd, *tls], capture_output=True, text=True, timeout=300)
    assert report.exists(), out.stdout[-2000:] + out.stderr[-2000:]
    passed, failed = results(report)
    assert len(passed) + len(failed) == CASES, out.stdout[-2000:]
    return passed, failed


@pytest.mark.parametrize("served", SERVED)
def test_h2spec_h2c(start_server, h2spec, tmp_path, served):
    worker, app, path = SERVED[served]
    server = start_server("-k", worker, app)
    passed, failed = run_h2spec(h2spec, server, tmp_path / "h2c.xml", path)
    assert failed == ["http2/3.5/2"], server.log()[-3000:]
    assert len(passed) == 144
    assert server.is_serving()


@pytest.mark.parametrize("served", SERVED)
def test_h2spec_tls(start_server, h2spec, tmp_path, served):
    worker, app, path = SERVED[served]
    cert = trustme.CA().issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    server = start_server(
        "-k", worker, "--certfile", str(tmp_path / "server.pem"),
        "--keyfile", str(tmp_path / "server.key"), app, wait=False,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not server.log().count("Ready:"):
        assert server.proc.poll() is None and time.monotonic() < deadline, server.log()
        time.sleep(0.1)
    passed, failed = run_h2spec(h2spec, server, tmp_path / "tls.xml", path, "-t", "-k")
    assert failed == [], server.log()[-3000:]
    assert len(passed) == CASES
