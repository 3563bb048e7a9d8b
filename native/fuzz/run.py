"""Runs the cargo-fuzz targets: a short smoke run (CI) or a long one (by hand).

    python native/fuzz/run.py --smoke              # every target, seconds each
    python native/fuzz/run.py --seconds 1800       # every target, 30 minutes each
    python native/fuzz/run.py --seconds 600 chunked

Installs what it needs when missing (the nightly toolchain, cargo-fuzz). The
corpus grows across runs in ~/.cache/supervise/fuzz-corpus/TARGET, seeded
from seeds/ and, when ../shared is there, the HTTP/1.1 conformance corpora.
A crash fails the run; its input lands in native/fuzz/artifacts/TARGET/ and
belongs in a regression test once fixed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
REPO = FUZZ_DIR.parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "supervise"
TARGETS = (
    "request_head",
    "chunked",
    "connection_h1",
    "connection_h2",
    "proxy_header",
    "differential_h1",
    "static_path",
)
# Raw HTTP/1.1 requests of the shared corpora: what the HTTP/1.1 targets start from.
SHARED_HTTP1 = REPO.parent / "shared" / "conformance" / "http1"
SMOKE_SECONDS = 15


def ensure_tools() -> None:
    have = subprocess.run(["rustup", "toolchain", "list"], capture_output=True, text=True)
    if "nightly" not in have.stdout:
        subprocess.run(
            ["rustup", "toolchain", "install", "nightly", "--profile", "minimal"], check=True
        )
    if shutil.which("cargo-fuzz") is None:
        subprocess.run(["cargo", "install", "cargo-fuzz", "--locked"], check=True)


def corpus_for(target: str) -> Path:
    """The growing corpus, topped up with the shared raw requests."""
    corpus = CACHE / "fuzz-corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    if target in ("request_head", "connection_h1", "differential_h1") and SHARED_HTTP1.is_dir():
        # The connection target reads its first byte as the write size.
        prefix = b"\x09" if target == "connection_h1" else b""
        for raw in SHARED_HTTP1.glob("*/*.raw"):
            seed = corpus / f"shared-{raw.parent.name}-{raw.stem}"
            if not seed.exists():
                seed.write_bytes(prefix + raw.read_bytes())
    return corpus


def run_target(target: str, *, seconds: int, env: dict[str, str]) -> int:
    """Runs one target; returns the number of inputs it executed."""
    artifacts = FUZZ_DIR / "artifacts" / target
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [
        "cargo",
        "+nightly",
        "fuzz",
        "run",
        target,
        str(corpus_for(target)),
        str(FUZZ_DIR / "seeds" / target),
        "--",
        f"-max_total_time={seconds}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
        # A run with paused time never sleeps: 10 s for one input is a hang.
        "-timeout=10",
        "-rss_limit_mb=2048",
    ]
    done = subprocess.run(
        command, cwd=FUZZ_DIR, env=env, stderr=subprocess.PIPE, text=True, check=False
    )
    found = re.search(r"stat::number_of_executed_units:\s*(\d+)", done.stderr)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-6000:])
        raise SystemExit(f"fuzz target {target} failed: see {artifacts}")
    return int(found.group(1)) if found else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--smoke", action="store_true", help=f"{SMOKE_SECONDS} s per target")
    when.add_argument("--seconds", type=int, help="seconds per target")
    parser.add_argument("targets", nargs="*", help=f"some of {', '.join(TARGETS)} (all)")
    args = parser.parse_args(argv)
    unknown = set(args.targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; there are {', '.join(TARGETS)}")
    ensure_tools()
    env = dict(os.environ)
    # Sanitizer flags differ from the release build: a target dir of its own
    # keeps the two from rebuilding each other.
    env["CARGO_TARGET_DIR"] = env.get("FUZZ_TARGET_DIR", str(CACHE / "cargo-target-fuzz"))
    seconds = SMOKE_SECONDS if args.smoke else args.seconds
    targets = args.targets or TARGETS
    subprocess.run(["cargo", "+nightly", "fuzz", "build"], cwd=FUZZ_DIR, env=env, check=True)
    for target in targets:
        executed = run_target(target, seconds=seconds, env=env)
        print(f"fuzz {target}: {executed} inputs in {seconds} s, no crash", flush=True)


if __name__ == "__main__":
    main()
