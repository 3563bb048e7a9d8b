"""Autobahn|Testsuite (wstest 0.8.2, fuzzingclient) against `supervise -k asgi` (both
--ws libraries), `supervise -k rsgi` (RSGI echo app) and `supervise -k native`
(the ASGI echo app on the engine), sections 1-10.

wstest is a Python 2.7 program: it is installed once into a cache directory
outside the repository (pyenv's 2.7.18, as ../shared/conformance/README.md
says), and the test is skipped, with the reason, where that cannot be done.
Sections 12 and 13 (compression) take ~10 minutes and are left out.

Peers on the same 301 cases: Uvicorn+wsproto, Hypercorn, Granian 301/301.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from supervise.http.asgi_ws import protocol_class

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "supervise" / "autobahn"
PREFIX = CACHE / "wstest-0.8.2"
SITE = PREFIX / "lib" / "python2.7" / "site-packages"
CASES = 301  # sections 1-10 of wstest 0.8.2
PASSING = {"OK", "NON-STRICT", "INFORMATIONAL"}
# wstest's own entry point, run with its site directory added (for its .pth files).
RUN = (
    "import site, sys; site.addsitedir(sys.argv.pop(1)); "
    "from autobahntestsuite.wstest import run; sys.argv[0] = 'wstest'; sys.exit(run())"
)

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]


def python27() -> str | None:
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        candidate = Path(root) / "versions" / "2.7.18" / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    return shutil.which("python2.7")


@pytest.fixture(scope="module")
def wstest() -> list[str]:
    """The command that runs wstest; installs it into the cache when missing."""
    python = python27()
    if python is None:
        pytest.skip("wstest needs Python 2.7 (pyenv install 2.7.18)")
    if not (SITE / "autobahntestsuite").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        install = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--prefix",
                str(PREFIX),
                "autobahntestsuite==0.8.2",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if install.returncode != 0:
            pytest.skip(f"cannot install autobahntestsuite 0.8.2: {install.stderr[-500:]}")
    return [python, "-c", RUN, str(SITE)]


# (worker class, --ws, echo app): the asgi worker with each library, the rsgi
# worker and the engine's ASGI adapter with the native codec.
TARGETS = {
    "asgi-websockets": ("asgi", "websockets", "asgi_ws_apps:echo"),
    "asgi-wsproto": ("asgi", "wsproto", "asgi_ws_apps:echo"),
    "rsgi": ("rsgi", "auto", "rsgi_ws_apps:echo"),
    "native-asgi": ("native", "auto", "asgi_ws_apps:echo"),
}


@pytest.mark.parametrize("target", list(TARGETS))
def test_autobahn_sections_1_to_10(start_server, wstest, tmp_path: Path, target: str) -> None:
    worker, ws, app = TARGETS[target]
    if worker == "asgi" and ws != "websockets" and protocol_class(ws) is None:
        pytest.skip(f"{ws} is not installed")
    server = start_server("-k", worker, "--ws", ws, "--ws-max-size", str(32 * 1024 * 1024), app)
    spec = {
        "outdir": str(tmp_path / "reports"),
        "servers": [{"agent": "supervise", "url": f"ws://127.0.0.1:{server.port}"}],
        "cases": ["1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"],
        "exclude-cases": [],
        "exclude-agent-cases": {},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    run = subprocess.run(
        [*wstest, "-m", "fuzzingclient", "-s", "spec.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
    )
    index = tmp_path / "reports" / "index.json"
    assert index.exists(), f"wstest wrote no report (rc {run.returncode}):\n{run.stdout[-3000:]}"
    results = json.loads(index.read_text())["supervise"]
    failed = {
        case: (r["behavior"], r["behaviorClose"])
        for case, r in results.items()
        if r["behavior"] not in PASSING or r["behaviorClose"] not in PASSING
    }
    print(f"autobahn {target}: {len(results) - len(failed)}/{len(results)} passed")
    assert len(results) == CASES
    assert not failed, f"{len(failed)} cases failed: {sorted(failed.items())}"
    assert "Traceback" not in server.log()
