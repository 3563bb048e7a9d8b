"""The suite's own virtual environments: peers from PyPI and supervise from this repository.

One venv per Python version under benchmarks/.venvs/, so a run is reproducible from a
fresh clone and never depends on what happens to be installed on the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCH_DIR.parent
VENVS_DIR = BENCH_DIR / ".venvs"
PYENV_VERSIONS = Path("/root/.pyenv/versions")

# Everything a server needs; installed in one pip call so the resolver sees them together.
PEERS = [
    "granian",
    "uvicorn",
    "httptools",
    "uvloop",
    "websockets",
    "hypercorn",
    "daphne",
    "gunicorn",
    "gevent",
    "uvicorn-worker",
]
# Each of these may fail to build or have no wheel for a Python version; a failure only
# removes the servers (or loop, or Hypercorn's HTTP/3: aioquic) that need it.
OPTIONAL = ["rloop", "uwsgi", "bjoern", "fastwsgi", "aioquic"]
# What an optional package needs from the system to build (it ships no wheel): headers,
# any one of which will do, and how to get them. Checked before pip so the report gives
# that reason rather than a compiler error, and tried again once they are there.
SYSTEM_NEEDS = {
    "bjoern": (
        ("/usr/include/ev.h", "/usr/include/libev/ev.h", "/usr/local/include/ev.h"),
        "libev headers missing: apt-get install -y libev-dev",
    ),
}
# Only the venv that draws the charts needs it.
CHARTS = ["matplotlib"]
# supervise's distribution name (pyproject's [project] name): "supervise" on PyPI is
# another project.
DISTRIBUTION = "supervise-server"
# Distributions whose versions the report lists.
REPORTED = [*PEERS, *OPTIONAL, DISTRIBUTION, "h11", "h2", "twisted"]

# What decides whether the installed supervise is stale: sources, not build outputs.
_SOURCE_GLOBS = [
    "pyproject.toml",
    "native/Cargo.toml",
    "native/Cargo.lock",
    "native/src/**/*.rs",
    "supervise/**/*.py",
]


@dataclass
class Venv:
    path: Path
    python_version: str  # "3.11"
    versions: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # optional package -> why

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def bin(self, name: str) -> str:
        return str(self.path / "bin" / name)

    def has(self, dist: str) -> bool:
        return dist.lower() in self.versions


def find_python(version: str) -> str:
    """An interpreter for "3.12": pyenv's build if present, else one on PATH."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    if PYENV_VERSIONS.is_dir():
        for candidate in sorted(PYENV_VERSIONS.glob(f"{version}.*"), reverse=True):
            exe = candidate / "bin" / "python"
            if exe.exists():
                return str(exe)
    for name in (f"python{version}",):
        for directory in os.environ.get("PATH", "").split(os.pathsep):
            exe = Path(directory) / name
            if exe.exists():
                return str(exe)
    raise FileNotFoundError(f"no Python {version} found (looked in {PYENV_VERSIONS} and PATH)")


def source_digest() -> str:
    """Hash of supervise's sources: reinstall only when the tree changed."""
    digest = hashlib.sha256()
    for pattern in _SOURCE_GLOBS:
        for path in sorted(REPO_ROOT.glob(pattern)):
            if "__pycache__" in path.parts or "target" in path.parts:
                continue
            digest.update(str(path.relative_to(REPO_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _pip(venv: Venv, args: list[str], log, env: dict[str, str] | None = None) -> bool:
    cmd = [venv.python, "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    log(f"  $ {' '.join(cmd[2:])}")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        log("    " + "\n    ".join(tail))
    return done.returncode == 0


def _installed_versions(venv: Venv) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m;"
        "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version"
        " for d in m.distributions()}))"
    )
    out = subprocess.run([venv.python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def missing_system(package: str) -> str:
    """Why `package` cannot build on this machine, or "" when nothing it needs is missing."""
    headers, why = SYSTEM_NEEDS.get(package, ((), ""))
    if not headers or any(Path(h).exists() for h in headers):
        return ""
    return why


def _install_optional(venv: Venv, state: dict, *, fresh: bool, up: list[str], log) -> None:
    """pip install the optional packages: all of them when the peers were just (re)installed,
    else those not in the venv yet (packages added to OPTIONAL reach existing venvs too).
    A pip failure is not retried until the peers are (--upgrade-peers): a failing build
    costs minutes every run. A missing system prerequisite is, as soon as it is there."""
    failed = state.setdefault("optional_failed", {})
    # Venvs made before "optional_tried" existed: their failures were pip failures.
    tried = state.setdefault("optional_tried", list(failed))
    installed = _installed_versions(venv)
    for extra in OPTIONAL:
        if (extra in installed and not fresh) or extra in tried:
            continue
        why = missing_system(extra)
        if why:
            if extra not in installed:
                failed[extra] = why
            log(f"  not installing {extra}: {why}")
            continue
        tried.append(extra)
        if _pip(venv, [*up, extra], log):
            failed.pop(extra, None)
        else:
            failed[extra] = "pip install failed (see the run log)"


def prepare(version: str, *, charts: bool, upgrade: bool, log) -> Venv:
    """Create or refresh the venv for one Python version; returns it with versions filled in."""
    venv = Venv(VENVS_DIR / f"py{version}", version)
    marker = venv.path / ".bench-installed.json"
    state = json.loads(marker.read_text()) if marker.exists() else {}
    if not (venv.path / "bin" / "python").exists():
        log(f"creating {venv.path} with Python {version}")
        subprocess.run([find_python(version), "-m", "venv", str(venv.path)], check=True)
        state = {}
    wanted = PEERS + (CHARTS if charts else [])
    up = ["--upgrade"] if upgrade else []
    fresh = upgrade or not set(wanted) <= set(state.get("peers", []))
    if fresh:
        log(f"installing peers into {venv.path.name}")
        if not _pip(venv, [*up, "pip"], log) or not _pip(venv, [*up, *wanted], log):
            raise RuntimeError(f"installing the peers into {venv.path} failed (see above)")
        state["peers"] = wanted
        state["optional_failed"] = {}
        state["optional_tried"] = []
    _install_optional(venv, state, fresh=fresh, up=up, log=log)
    digest = source_digest()
    if state.get("supervise") != digest:
        log(f"installing supervise from {REPO_ROOT} into {venv.path.name} (sources changed)")
        # A separate cargo target per venv keeps our release builds from invalidating the
        # developers' own build directory.
        env = dict(os.environ, CARGO_TARGET_DIR=str(VENVS_DIR / f"cargo-target-{version}"))
        # Once installed, --force-reinstall --no-deps: the version number does not change
        # between edits, so pip would otherwise keep the stale build.
        again = ["--no-deps", "--force-reinstall"] if state.get("supervise") else []
        if "supervise" in _installed_versions(venv):
            # Installed under its old distribution name, whose files the new one shares.
            subprocess.run([venv.python, "-m", "pip", "uninstall", "-q", "-y", "supervise"])
        if not _pip(venv, [*again, str(REPO_ROOT)], log, env):
            raise RuntimeError(f"installing supervise into {venv.path} failed (see above)")
        state["supervise"] = digest
    marker.write_text(json.dumps(state, indent=1))
    venv.failed = dict(state.get("optional_failed", {}))
    venv.versions = _installed_versions(venv)
    return venv


def server_env(venv: Venv, *, pythonpath: list[str], **extra: str) -> dict[str, str]:
    """The environment a server of `venv` starts in: its bin first on PATH, the apps on
    PYTHONPATH (the harness's own VIRTUAL_ENV not leaking in)."""
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{venv.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    env.update(extra)
    return env


def current() -> Venv:
    """The interpreter running the harness, as it is (`run.py --here`): supervise already
    installed there, as in a developer's or CI's venv; no peer installed, nothing built."""
    venv = Venv(Path(sys.prefix), f"{sys.version_info.major}.{sys.version_info.minor}")
    venv.versions = _installed_versions(venv)
    return venv


def reported_versions(venv: Venv) -> dict[str, str]:
    return {name: venv.versions[name] for name in REPORTED if name in venv.versions}


def source_state() -> dict[str, str]:
    """Which supervise was measured: the commit, whether the tree had edits, the digest."""
    state = {"digest": source_digest()[:16], "commit": "", "dirty": ""}
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        state["commit"] = head.stdout.strip() if head.returncode == 0 else "(no commit)"
        status = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "supervise", "native"],
            capture_output=True,
            text=True,
        )
        state["dirty"] = "yes" if status.stdout.strip() else "no"
    except OSError:
        pass
    return state
