"""The suite's venv from a folder of wheels, never the network (`run.py --wheelhouse DIR`):
for a machine with many cores and no network, set up from the bundle that
benchmarks/manycore/make_bundle.sh builds (supervise's wheel, the peers' and their
dependencies').

Every install is `pip install --no-index --find-links DIR`. A peer whose wheel (or one of
its dependencies') is not in the folder only loses its own rows, with that reason in the
report, as a peer that fails to build does with the PyPI venvs (bench/peers.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

from bench.peers import (
    CHARTS,
    DISTRIBUTION,
    OPTIONAL,
    PEERS,
    VENVS_DIR,
    Venv,
    _installed_versions,
    _pip,
    find_python,
)

# Written by make_bundle.sh beside the wheels: the checkout supervise's wheel was built
# from. The bundle holds no git repository, so the report's commit comes from here.
SOURCE_FILE = "supervise-source.json"
NOT_INSTALLED = (
    "pip install --no-index failed: a dependency's wheel missing from the wheelhouse? "
    "(see the run log)"
)


def normalize(name: str) -> str:
    """PEP 503's name: "Zope.Interface" and "zope_interface" are "zope-interface"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def dists(wheels: Path) -> dict[str, list[Path]]:
    """Distribution name -> its wheel files in the folder (a wheel's name is
    `{distribution}-{version}-...whl`, the distribution with "_" for "-")."""
    found: dict[str, list[Path]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        found.setdefault(normalize(wheel.name.split("-", 1)[0]), []).append(wheel)
    return found


def venv_path(version: str) -> Path:
    """Apart from the PyPI venvs: a wheelhouse's supervise is a given build, not this
    checkout's sources, and must never replace the one those venvs measure."""
    return VENVS_DIR / f"py{version}-wheelhouse"


def digest(wheels: Path) -> str:
    """What decides a reinstall: every wheel's name and bytes (a rebuilt supervise keeps
    its version number, so pip alone would keep the old one)."""
    h = hashlib.sha256()
    for wheel in sorted(wheels.glob("*.whl")):
        h.update(wheel.name.encode())
        h.update(hashlib.sha256(wheel.read_bytes()).digest())
    return h.hexdigest()


def _create(venv: Venv, wheels: Path, log) -> None:
    python = find_python(venv.python_version)
    log(f"creating {venv.path} with Python {venv.python_version} (wheels from {wheels})")
    made = subprocess.run([python, "-m", "venv", str(venv.path)], capture_output=True, text=True)
    if made.returncode == 0:
        return
    # A Debian Python without python3-venv has no ensurepip: a venv without pip, then pip
    # run from its own wheel (a wheel is a zip Python can run from) installs itself.
    log(f"  python -m venv failed ({made.stderr.strip()[-200:]}); trying --without-pip")
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv.path)], check=True)
    pip_wheels = dists(wheels).get("pip")
    if not pip_wheels:
        raise RuntimeError(f"{python} has no ensurepip and {wheels} holds no pip wheel")
    wheel = str(pip_wheels[-1])
    cmd = [venv.python, f"{wheel}/pip", "install", "-q", "--no-index", wheel]
    subprocess.run(cmd, check=True)


def _install(venv: Venv, wheels: Path, args: list[str], log) -> bool:
    return _pip(venv, ["--no-index", "--find-links", str(wheels), *args], log)


def prepare(version: str, wheels: Path, *, charts: bool, log) -> Venv:
    """The venv for one Python version, installed from `wheels` alone; versions filled in
    and, in `failed`, why each peer the folder could not provide is missing."""
    wheels = wheels.resolve()
    if not wheels.is_dir():
        raise FileNotFoundError(f"no wheelhouse at {wheels}")
    have = dists(wheels)
    if DISTRIBUTION not in have:
        raise RuntimeError(
            f"no {DISTRIBUTION} wheel in {wheels}: benchmarks/manycore/make_bundle.sh "
            "builds one (or `pip wheel --no-deps -w DIR .` from the repository)"
        )
    venv = Venv(venv_path(version), version)
    marker = venv.path / ".bench-installed.json"
    state = json.loads(marker.read_text()) if marker.exists() else {}
    if not (venv.path / "bin" / "python").exists():
        _create(venv, wheels, log)
        state = {}
    current = digest(wheels)
    if state.get("wheelhouse") != current:
        failed = {
            p: f"no {p} wheel in the wheelhouse"
            for p in [*PEERS, *OPTIONAL]
            if normalize(p) not in have
        }
        wanted = [
            p for p in [*PEERS, *OPTIONAL, *(CHARTS if charts else [])] if normalize(p) in have
        ]
        log(f"installing {', '.join(wanted) or 'no peer'} and supervise from {wheels}")
        # One call lets the resolver see them together; when it fails (a dependency
        # missing from the folder), one at a time so that only the culprit is lost.
        if not _install(venv, wheels, [DISTRIBUTION, *wanted], log):
            if not _install(venv, wheels, [DISTRIBUTION], log):
                raise RuntimeError(f"installing {DISTRIBUTION} from {wheels} failed (see above)")
            for package in wanted:
                if not _install(venv, wheels, [package], log):
                    failed[package] = NOT_INSTALLED
        # The same version number as the build it replaces: only forcing installs it.
        if not _install(venv, wheels, ["--force-reinstall", "--no-deps", DISTRIBUTION], log):
            raise RuntimeError(f"reinstalling {DISTRIBUTION} from {wheels} failed (see above)")
        state = {"wheelhouse": current, "failed": failed}
        marker.write_text(json.dumps(state, indent=1))
    venv.failed = dict(state.get("failed", {}))
    venv.versions = _installed_versions(venv)
    return venv


def source_state(wheels: Path) -> dict[str, str]:
    """Which supervise the wheelhouse holds, in bench/peers.py's source_state's shape: the
    bundle's record of its checkout, else the wheel's own digest."""
    record = wheels / SOURCE_FILE
    if record.exists():
        state = json.loads(record.read_text())
        return {k: str(state.get(k, "")) for k in ("commit", "dirty", "digest", "wheel")}
    files = dists(wheels).get(DISTRIBUTION, [])
    wheel = files[-1] if files else None
    return {
        "commit": f"(unknown: no {SOURCE_FILE} in the wheelhouse)",
        "dirty": "?",
        "digest": hashlib.sha256(wheel.read_bytes()).hexdigest()[:16] if wheel else "?",
        "wheel": wheel.name if wheel else "",
    }
