"""The HTTP/3 part (h3-get, h3-post) and its HTTP/2-over-TLS counterparts (h2tls-get,
h2tls-post): which servers run them, how they are started (the run's certificate, TCP and
UDP on one port number), how h3load is driven, and how the report pairs the two.

Run with: .venv/bin/pytest benchmarks/tests (needs no server, no Go and no openssl: the
certificate and the load generator are stood in for).
"""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import loadgen, plan, procs, report, runner, servers, verify
from bench.peers import BENCH_DIR, Venv
from bench.servers import PEERS, Options, Unsupported

VENV = Venv(Path("/nowhere/venv"), "3.11")
BY_NAME = {s.name: s for s in PEERS}
MODULES = {wc.module for wc in servers.SUPERVISE_WORKERS.values()}
SUPERVISE = {s.name: s for s in servers.supervise_rows("--quic-bind", MODULES)}
HTTP3 = ("h2tls-get", "h2tls-post", "h3-get", "h3-post")


@pytest.fixture(autouse=True)
def _certificate(monkeypatch) -> None:
    """No openssl here: the run's certificate is a pair of names."""
    monkeypatch.setattr(servers, "_tls_made", [(".work/tls/cert.pem", ".work/tls/key.pem")])


def _main(name: str) -> plan.Point:
    return plan.Point("main", plan.BY_NAME[name], "3.11")


def _command(server: servers.Server, scenario: str, port: int = 8443) -> list[str]:
    point = _main(scenario)
    return server.command(VENV, port, plan.server_options(point))


def test_the_http3_scenarios_and_their_http2_over_tls_twins_send_the_same_requests() -> None:
    for h3, h2 in (("h3-get", "h2tls-get"), ("h3-post", "h2tls-post")):
        a, b = plan.BY_NAME[h3], plan.BY_NAME[h2]
        assert (a.path, a.method, a.body_size) == (b.path, b.method, b.body_size)
        assert a.protocol == "h3" and a.secure and a.needs == "h3"
        assert b.protocol == "h2" and b.tls and b.secure and b.needs == "h2tls"
    post = plan.BY_NAME["h3-post"]
    assert post.path == "/echo" and post.body_size == 10240
    assert post.expected_body() == post.request_body()
    assert plan.BY_NAME["h3-get"].path == "/4b"
    # The h2c scenarios stay in clear text.
    assert not plan.BY_NAME["h2-get"].secure and plan.BY_NAME["h2-get"].needs == "h2"


def test_tls_scenarios_start_the_server_with_the_certificate_and_h3_adds_quic_bind() -> None:
    assert plan.server_options(_main("get-4b")) == Options()
    assert plan.server_options(_main("h2tls-get")) == Options(tls=True)
    assert plan.server_options(_main("h3-post")) == Options(tls=True, quic=True)
    assert Options(tls=True, quic=True).label() == "1w tls+h3"
    for name in ("supervise-rsgi", "supervise-native", "supervise-native-asgi"):
        cmd = _command(SUPERVISE[name], "h3-get")
        assert cmd[cmd.index("--certfile") + 1] == ".work/tls/cert.pem"
        assert cmd[cmd.index("--keyfile") + 1] == ".work/tls/key.pem"
        # HTTP/3 on UDP and TLS on TCP, the same port number.
        assert cmd[cmd.index("--quic-bind") + 1] == "127.0.0.1:8443"
        assert cmd[cmd.index("-b") + 1] == "127.0.0.1:8443"
        assert "--quic-bind" not in _command(SUPERVISE[name], "h2tls-get")
        assert "--certfile" not in _command(SUPERVISE[name], "get-4b")
    native_asgi = _command(SUPERVISE["supervise-native-asgi"], "h3-get")
    assert native_asgi[native_asgi.index("-k") + 1] == "native"
    assert native_asgi[-1] == "apps.asgi_app:app"
    hypercorn = _command(BY_NAME["hypercorn"], "h3-post")
    assert hypercorn[hypercorn.index("--quic-bind") + 1] == "127.0.0.1:8443"
    assert hypercorn[hypercorn.index("--certfile") + 1] == ".work/tls/cert.pem"
    assert hypercorn[hypercorn.index("-b") + 1] == "127.0.0.1:8443"


def test_servers_without_http3_are_skipped_never_started() -> None:
    h3 = _main("h3-get")
    # Peers that do not list it are not applicable at all ...
    assert not plan.applicable(h3, BY_NAME["granian-asgi"])
    assert not plan.applicable(_main("h2tls-get"), BY_NAME["granian-asgi"])
    assert plan.applicable(h3, BY_NAME["hypercorn"])
    # ... supervise's other workers are probed, and have no command: skipped, with why.
    with pytest.raises(Unsupported, match="HTTP/3"):
        _command(SUPERVISE["supervise-sync"], "h3-get")
    # A supervise without --quic-bind has no h3 row, only its TLS one.
    older = {s.name: s for s in servers.supervise_rows("", MODULES)}
    assert "h3" not in older["supervise-rsgi"].features
    assert "h2tls" in older["supervise-rsgi"].features


def test_hypercorn_serves_http3_only_with_aioquic_installed() -> None:
    bare = Venv(Path("/nowhere/venv"), "3.11", versions={"hypercorn": "0.18.0"})
    peers, missing = servers.available_peers(bare)
    (hypercorn,) = (s for s in peers if s.name == "hypercorn")
    assert "h3" not in hypercorn.features and "h2tls" in hypercorn.features
    assert missing["hypercorn (h3)"] == "aioquic not installed"
    full = Venv(Path("/nowhere/venv"), "3.11", versions={"hypercorn": "0.18.0", "aioquic": "1"})
    peers, missing = servers.available_peers(full)
    assert "h3" in next(s for s in peers if s.name == "hypercorn").features
    assert "hypercorn (h3)" not in missing


def _run_module():
    spec = importlib.util.spec_from_file_location("bench_run_py", BENCH_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_http3_part_runs_its_four_scenarios_on_the_servers_that_serve_http3() -> None:
    points, rows = _run_module().part_plan("http3", "3.11")
    assert [p.scenario.name for p in points] == list(HTTP3)
    names = {s.name for s in rows["3.11"]}
    assert names == {"supervise-rsgi", "supervise-native", "supervise-native-asgi", "hypercorn"}
    for point in points:
        assert all(plan.applicable(point, s) for s in rows["3.11"])
    # Every other scenario is in --full, so the HTTP/3 rows are there too.
    assert set(HTTP3) <= set(plan.FULL.scenarios)


def test_h3load_gets_the_levels_requests_in_flight_as_connections_times_streams(
    monkeypatch,
) -> None:
    ran = []
    output = (
        'BENCH_JSON {"requests":2000,"duration_us":2000000,"bytes":8000,'
        '"errors":{"connect":0,"read":0,"write":1,"status":0,"timeout":2},'
        '"latency_us":{"min":1,"max":9000,"mean":1500,"stdev":1,"p50":1,"p90":1,"p99":3000},'
        '"rps":1000,"connections":12,"streams":10,"status_codes":{"200":2000}}\n'
    )
    monkeypatch.setattr(loadgen, "h3load_binary", lambda: Path("/x/h3load"))
    monkeypatch.setattr(
        loadgen, "_execute", lambda cmd, duration: (ran.append(cmd), (output, ""))[1]
    )
    post = plan.BY_NAME["h3-post"]
    load = loadgen._dispatch("https://127.0.0.1:8443", post, 128, 2.0, "1")
    (pinned,) = ran
    assert pinned[:4] == ["taskset", "-c", "1", "/x/h3load"]
    cmd = pinned[4:]
    assert cmd[cmd.index("-url") + 1] == "https://127.0.0.1:8443/echo"
    assert cmd[cmd.index("-c") + 1] == str(128 // loadgen.H3_STREAMS)
    assert cmd[cmd.index("-m") + 1] == str(loadgen.H3_STREAMS)
    assert cmd[cmd.index("-method") + 1] == "POST"
    assert cmd[cmd.index("-body-size") + 1] == "10240"
    assert "-insecure" in cmd
    assert load.tool == "h3load" and load.connections == 128 and load.requests == 2000
    assert load.socket_errors == 3 and not load.clean
    # 4 B of body per response for a 10 KiB echo: short responses.
    assert "short responses" in load.problem


def test_tls_points_are_loaded_over_https_and_need_go_and_openssl(monkeypatch) -> None:
    assert runner._base(_main("h3-get"), 8443) == "https://127.0.0.1:8443"
    assert runner._base(_main("h2tls-get"), 8443) == "https://127.0.0.1:8443"
    assert runner._base(_main("h2-get"), 8443) == "http://127.0.0.1:8443"
    monkeypatch.setattr(loadgen.shutil, "which", lambda tool: None)
    assert {"go", "openssl"} <= set(loadgen.missing_tools({"h1", "h3"}))
    assert "openssl" in loadgen.missing_tools({"h1", "h2", "tls"})
    assert "openssl" not in loadgen.missing_tools({"h1", "h2"})


def test_verify_asks_h3load_for_the_body_and_checks_it_byte_for_byte(monkeypatch) -> None:
    calls = []

    class Done:
        returncode = 0
        stdout = "ok\n"
        stderr = ""

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        Path(cmd[cmd.index("-o") + 1]).write_bytes(body)
        return Done()

    monkeypatch.setattr(loadgen, "h3load_binary", lambda: Path("/x/h3load"))
    monkeypatch.setattr(verify.subprocess, "run", fake_run)
    scenario = plan.BY_NAME["h3-post"]
    body = scenario.expected_body()
    assert verify.check("127.0.0.1", 8443, scenario) == ""
    assert calls[0][calls[0].index("-url") + 1] == "https://127.0.0.1:8443/echo"
    assert "-verify" in calls[0] and calls[0][calls[0].index("-body-size") + 1] == "10240"
    body = b"wrong"
    assert "expected 10240 B" in verify.check("127.0.0.1", 8443, scenario)


def _entry(name: str, rps: float, status: str = "ok") -> dict:
    run = loadgen.Load("h3load", 64, requests=int(rps), duration_s=1.0, rps=rps).to_dict()
    return {
        "server": name,
        "interface": "rsgi",
        "supervise": name.startswith("supervise"),
        "version": "1",
        "note": "",
        "status": status,
        "reason": "",
        "command": [],
        "memory_idle": None,
        "memory_load": None,
        "runs": [run],
        "best": run,
    }


def _point(scenario: str, entries: list[dict]) -> dict:
    s = plan.BY_NAME[scenario]
    return {
        "table": "main",
        "scenario": scenario,
        "title": s.title,
        "protocol": s.protocol,
        "python": "3.11",
        "options": {"workers": 1, "loop": None, "runtime_threads": None},
        "servers": {e["server"]: e for e in entries},
    }


def test_the_report_gives_each_servers_http3_against_its_http2_over_tls() -> None:
    points = [
        _point("h2tls-get", [_entry("supervise-rsgi", 2000.0), _entry("hypercorn", 800.0)]),
        _point("h3-get", [_entry("supervise-rsgi", 1000.0), _entry("hypercorn", 400.0, "errors")]),
    ]
    doc = {
        "meta": {
            "date": "2026-01-01",
            "command": "python benchmarks/run.py --part http3",
            "profile": "part http3",
            "levels": [64],
            "duration": 1.0,
            "warmup": 0.0,
            "rounds": 1,
            "server_cpu": 0,
            "load_cpu": 1,
            "wrk_timeout": "4s",
            "h2_streams": 10,
        },
        "machine": dict.fromkeys(
            ("host", "cores", "cpu", "memory_gib", "kernel", "virtualisation", "governor"), "x"
        )
        | {"harness_python": "3.11"},
        "tools": {},
        "versions": {},
        "points": points,
    }
    text = report.render(doc, "charts")
    assert "## HTTP/3 against the same server's HTTP/2 over TLS" in text
    assert "| **supervise-rsgi** | HTTP/3 GET 4 B | 2,000 | 1,000 | 0.50x |" in text
    assert "| hypercorn ⚠ | HTTP/3 GET 4 B | 800 | 400 | 0.50x ⚠ |" in text
    assert "h3load (in this suite, Go" in text
    assert "## HTTP/3 GET 4 B (`h3-get`): pinned, 1 worker" in text


def test_an_http3_server_gets_a_port_number_free_over_tcp_and_udp() -> None:
    port = procs.free_port(udp=True)
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", port))
        udp.bind(("127.0.0.1", port))
