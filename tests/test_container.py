"""The container example: supervise as PID 1 (reaping orphans, stopping on
TERM after its drain), and the Kubernetes manifests against the settings file
they are sized from."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import APPS_DIR, free_port, wait_until

from supervise.cli import load_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CONF = EXAMPLES / "docker" / "supervise.conf.py"


def _manifests() -> dict[str, dict]:
    yaml = pytest.importorskip("yaml")
    found = {}
    for path in sorted((EXAMPLES / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            found[doc["kind"]] = doc
    return found


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_kubernetes_manifests_match_the_settings_file():
    cfg = load_config(["-c", str(CONF), "hello_wsgi:app"], {})
    docs = _manifests()
    deployment, service = docs["Deployment"], docs["Service"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == _port(cfg.bind[0])
    assert ports["metrics"] == _port(cfg.metrics_bind)
    assert container["readinessProbe"]["httpGet"] == {
        "path": f"{cfg.health_path}/ready",
        "port": "http",
    }
    for probe in ("livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": f"{cfg.health_path}/live", "port": "http"}
    # The kubelet SIGKILLs after the grace period: the drain and the
    # graceful stop must both fit in it, with a margin.
    grace = pod["terminationGracePeriodSeconds"]
    assert grace > cfg.shutdown_delay + cfg.graceful_timeout
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ports["metrics"])
    assert {p["targetPort"] for p in service["spec"]["ports"]} == {"http", "metrics"}
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # The image's user, as the Dockerfile creates it.
    assert (
        f"--uid {pod['securityContext']['runAsUser']} "
        in (EXAMPLES / "docker" / "Dockerfile").read_text()
    )
    assert (
        docs["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"]
        == (deployment["metadata"]["name"])
    )


def _in_new_pid_namespace() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run(
        [unshare, "--pid", "--fork", "true"], capture_output=True, timeout=10, check=False
    )
    return done.returncode == 0


def _zombies_under(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(pid) and fields.get("State", "").startswith("Z"):
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not _in_new_pid_namespace(), reason="no PID namespace here (unshare)")
def test_supervise_as_pid_1_reaps_orphans_and_stops_on_term(tmp_path):
    """As in a container without an init: supervise is PID 1 of its PID
    namespace, with the example image's settings file."""
    port = free_port()
    log = tmp_path / "server.log"
    command = [
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        sys.executable,
        "-m",
        "supervise",
        "-c",
        str(CONF),
        "-b",
        f"127.0.0.1:{port}",
        "--metrics-bind",
        f"127.0.0.1:{free_port()}",
        "--shutdown-delay",
        "1",
        "-k",
        "sync",
        "forking_app:app",
    ]
    with open(log, "wb") as out:
        unshare = subprocess.Popen(
            command, cwd=APPS_DIR, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        master = wait_until(lambda: _only_child(unshare.pid))
        assert _ns_pid(master) == 1

        def get(path: str) -> tuple[int, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                return resp.status, resp.read()
            finally:
                conn.close()

        wait_until(lambda: _serves(get))
        for _ in range(5):
            assert get("/orphan") == (200, b"orphaned")
        # The grandchildren exit 0.2 s later, children of PID 1 by then: the
        # master reaps them (its loop waits for any child), no zombie stays.
        wait_until(lambda: not _zombies_under(master), timeout=10)
        assert get("/healthz/ready") == (200, b"ready\n")
        os.kill(master, 15)
        wait_until(lambda: "Draining" in log.read_text())
        assert unshare.wait(30) == 0
    finally:
        if unshare.poll() is None:
            os.killpg(unshare.pid, 9)
            unshare.wait(10)
    text = log.read_text()
    assert "Drain over: stopping gracefully" in text
    assert "Shutting down: Master" in text


def _only_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if len(children) == 1 else None


def _ns_pid(pid: int) -> int:
    """The pid ``pid`` has inside its own (innermost) PID namespace."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError("no NSpid line")


def _serves(get) -> bool:
    try:
        return get("/")[0] == 200
    except OSError:
        return False
