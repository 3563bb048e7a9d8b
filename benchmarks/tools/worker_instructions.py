"""Instructions per request of a whole server process, counted.

Wall-clock figures on a shared VM move 15-40% between runs; an instruction
count does not. This starts a server under callgrind (children traced, so a
supervise worker or a Granian worker is counted in its own file), sends a
fixed number of requests with ``h2load --h1 -c 8`` (POSTs with ``--data
FILE``), stops it, and keeps the busiest process's total; twice, for two
request counts. The difference of the totals over the difference of the
requests is one request's cost, start-up and the first request cancelled
out. The kernel's share is not in it.

    python benchmarks/tools/worker_instructions.py -- supervise -k gthread --threads 4 \\
        -w 1 -b 127.0.0.1:8711 apps.wsgi_app:app
    python benchmarks/tools/worker_instructions.py -- granian --interface wsgi \\
        --host 127.0.0.1 --port 8711 --workers 1 apps.wsgi_app:app

Run from benchmarks/ (the apps are imported from there). Needs valgrind and
h2load. ``--keep DIR`` leaves the callgrind files there for callgrind_annotate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path


def _busiest(folder: Path) -> int:
    """The largest total among the callgrind files in ``folder`` (the worker)."""
    best = 0
    for path in folder.glob("cg.*"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                best = max(best, int(line.split()[1]))
                break
    return best


def _wait_ready(url: str, server: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited ({server.returncode}) before answering")
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"no answer from {url} within {seconds:.0f} s")


def count(
    command: list[str], url: str, requests: int, folder: Path, data: Path | None = None
) -> int:
    """Total instructions of the busiest process for ``requests`` requests (POSTs of
    ``data``'s bytes when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cg = ["valgrind", "--tool=callgrind", "--trace-children=yes"]
    cg.append(f"--callgrind-out-file={folder}/cg.%p")
    with open(folder / "server.log", "wb") as log:
        server = subprocess.Popen(cg + command, stdout=log, stderr=log, env=env)
    try:
        _wait_ready(url, server, 120)
        load = ["h2load", "--h1", "-c", "8", "-m", "1", "-n", str(requests), url]
        if data is not None:
            load[1:1] = ["-d", str(data)]
        out = subprocess.run(load, capture_output=True, text=True, check=True).stdout
        if f"{requests} succeeded" not in out:
            raise SystemExit(f"not every request succeeded:\n{out}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
    return _busiest(folder)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8711/4b")
    p.add_argument("--first", type=int, default=2000, help="requests in the first run")
    p.add_argument("--second", type=int, default=6000, help="requests in the second run")
    p.add_argument("--data", type=Path, help="POST this file's bytes (h2load -d)")
    p.add_argument("--keep", type=Path, help="leave the callgrind files here")
    p.add_argument("command", nargs="+", help="the server command, after --")
    args = p.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="instructions-"))
    try:
        first = count(args.command, args.url, args.first, folder / str(args.first), args.data)
        second = count(args.command, args.url, args.second, folder / str(args.second), args.data)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    per_request = (second - first) / (args.second - args.first)
    print(f"{per_request:,.0f} instructions a request ({args.url})")


if __name__ == "__main__":
    main()
