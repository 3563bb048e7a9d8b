"""Log formats and destinations on a real server: --log-format json for every
worker class, a logging config file (ini and JSON, supervise's and Gunicorn's
logger names), syslog over UDP and a unix datagram socket, and
--capture-output beside them."""

from __future__ import annotations

import base64
import json
import re
import socket
from pathlib import Path

from conftest import wait_until
from ops_helpers import ops_app


def json_lines(path: Path) -> list[dict]:
    """Every line of a JSON-lines log; a line that is not a JSON object fails the test."""
    text = path.read_text() if path.exists() else ""
    objects = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(o, dict) for o in objects), text
    return objects


def test_json_lines_for_every_worker_class(any_worker, start_server, tmp_path):
    access, error = tmp_path / "access.log", tmp_path / "error.log"
    server = start_server(
        "-k",
        any_worker,
        "--log-format",
        "json",
        "--access-logfile",
        str(access),
        "--error-logfile",
        str(error),
        ops_app(any_worker),
    )
    auth = "Basic " + base64.b64encode(b"alice:secret").decode()
    headers = {
        "X-Request-ID": "req-42",
        "User-Agent": 'agent "quoted"\ttab',
        "Referer": "http://example.com/from",
        "Authorization": auth,
    }
    status, _, body = server.get("/status/404?a=1&b=%22", headers=headers)
    assert (status, body) == (404, b"status 404")
    assert server.get("/raise")[0] == 500

    def logged() -> list[dict]:
        return [o for o in json_lines(access) if o["path"] in ("/status/404", "/raise")]

    first, second = wait_until(lambda: len(lines := logged()) == 2 and lines)
    assert first["time"] and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+[+-]\d\d:\d\d", first["time"])
    assert first["pid"] in server.workers()
    assert {k: first[k] for k in first if k not in ("time", "pid", "duration", "bytes")} == {
        "remote_addr": "127.0.0.1",
        "user": "alice",
        "method": "GET",
        "path": "/status/404",
        "query": "a=1&b=%22",
        "protocol": "HTTP/1.1",
        "status": 404,
        "referer": "http://example.com/from",
        "user_agent": 'agent "quoted"\ttab',
        "request_id": "req-42",
    }
    assert isinstance(first["duration"], float) and first["duration"] >= 0
    assert first["bytes"] == 10
    assert second["status"] == 500 and "request_id" not in second

    def failure() -> dict | None:
        found = [o for o in json_lines(error) if "Error handling request" in o["message"]]
        return found[0] if found else None

    record = wait_until(failure)
    assert record["level"] == "ERROR" and record["logger"] == "supervise.error"
    assert "GET /raise" in record["message"] and record["pid"] in server.workers()
    assert "RuntimeError: the app failed on purpose" in record["exception"]
    assert any(o["message"].startswith("Starting supervise") for o in json_lines(error))


# Every atom that does not change from run to run, each class reading the same
# request (a percent-encoded path, a field sent twice, the two fields WSGI names
# without HTTP_): the line must be the same whichever class served it.
EVERY_ATOM = (
    '%(h)s %(l)s %(u)s "%(r)s" %(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %(b)s "%(f)s" "%(a)s" '
    "%({content-type}i)s %({content-length}i)s %({x-two}i)s %({host}i)s %({missing}i)s "
    "%({content-type}o)s %({missing}o)s"
)


def test_text_lines_for_every_worker_class(any_worker, start_server, tmp_path):
    access = tmp_path / "access.log"
    server = start_server(
        "-k",
        any_worker,
        "--access-logfile",
        str(access),
        "--access-logformat",
        EVERY_ATOM,
        ops_app(any_worker),
    )
    request = (
        b"GET /status/%34%304?a=1&b=%22 HTTP/1.1\r\nHost: h.example\r\n"
        b"Content-Type: text/x-test\r\nContent-Length: 0\r\nX-Two: one\r\nX-Two: two\r\n"
        b'User-Agent: agent "quoted"\r\nReferer: http://example.com/from\r\n'
        b"Connection: close\r\n\r\n"
    )
    assert server.raw(request).startswith(b"HTTP/1.1 404")

    def line() -> str | None:
        text = access.read_text() if access.exists() else ""
        found = [x for x in text.splitlines() if "/status/404" in x]
        return found[0] if found else None

    assert wait_until(line) == (
        '127.0.0.1 - - "GET /status/%34%304?a=1&b=%22 HTTP/1.1" GET /status/404 a=1&b=%22 HTTP/1.1 '
        '404 10 10 "http://example.com/from" "agent \\"quoted\\"" '
        "text/x-test 0 one,two h.example - text/plain -"
    )


GUNICORN_INI = """\
[loggers]
keys=root, gunicorn.error, gunicorn.access

[handlers]
keys=file

[formatters]
keys=plain

[logger_root]
level=WARNING
handlers=

[logger_gunicorn.error]
level=INFO
handlers=file
propagate=0
qualname=gunicorn.error

[logger_gunicorn.access]
level=INFO
handlers=file
propagate=0
qualname=gunicorn.access

[handler_file]
class=FileHandler
formatter=plain
args=('%(here)s/from-ini.log', 'a')

[formatter_plain]
format=INI %(name)s %(levelname)s %(message)s
"""


def test_gunicorn_ini_logconfig(start_server, tmp_path):
    """A Gunicorn logging ini file works unchanged: access lines go to its handlers
    even without --access-logfile, and %(here)s names the file's folder."""
    ini = tmp_path / "logging.ini"
    ini.write_text(GUNICORN_INI)
    server = start_server("--log-config", str(ini), "logs_app:app")
    server.get("/from-ini")
    target = tmp_path / "from-ini.log"
    wait_until(lambda: target.exists() and "/from-ini" in target.read_text())
    text = target.read_text()
    assert "INI gunicorn.error INFO Booting worker" in text
    access = r'^INI gunicorn\.access INFO 127\.0\.0\.1 .*"GET /from-ini HTTP/1\.1" 200'
    assert re.search(access, text, re.M), text


def test_logconfig_json_with_json_lines(start_server, tmp_path):
    config = {
        "version": 1,
        "handlers": {
            "access": {"class": "logging.FileHandler", "filename": str(tmp_path / "a.log")},
        },
        "loggers": {"supervise.access": {"handlers": ["access"], "propagate": False}},
    }
    path = tmp_path / "logging.json"
    path.write_text(json.dumps(config))
    server = start_server("--log-config-json", str(path), "--log-format", "json", "logs_app:app")
    server.get("/via-json-config", headers={"X-Request-ID": "r1"})
    line = wait_until(
        lambda: [o for o in json_lines(tmp_path / "a.log") if o["path"] == "/via-json-config"]
    )[0]
    assert line["request_id"] == "r1" and line["status"] == 200


def test_broken_logconfig_is_one_clear_error(start_server, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    bad = str(tmp_path / "bad.json")
    server = start_server("--log-config-json", bad, "logs_app:app", wait=False)
    assert server.proc.wait(30) != 0
    assert "bad.json" in server.log() and "not valid JSON" in server.log()
    assert "Traceback" not in server.log()


def _receive(sock: socket.socket, count: int, pattern: str) -> list[str]:
    """Datagrams until ``count`` of them match ``pattern``; all of them."""
    got: list[str] = []
    sock.settimeout(15)
    while len([g for g in got if re.search(pattern, g)]) < count:
        got.append(sock.recv(65536).decode())
    return got


def test_syslog_over_udp(start_server, tmp_path):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    port = receiver.getsockname()[1]
    with receiver:
        server = start_server(
            "--log-syslog",
            "--log-syslog-to",
            f"udp://127.0.0.1:{port}",
            "--log-syslog-prefix",
            "shop",
            "--log-syslog-facility",
            "local3",
            "logs_app:app",
        )
        server.get("/through-syslog")
        got = _receive(receiver, 1, "/through-syslog")
    # <PRI> = facility * 8 + severity: local3 (19) and info (6).
    starting = rf"<158>supervise\.shop\.error: \[{server.pid}\] Starting supervise.*\x00"
    assert any(re.fullmatch(starting, g) for g in got), got
    (access,) = [g for g in got if "/through-syslog" in g]
    assert re.fullmatch(
        r"<158>supervise\.shop\.access: \[\d+\] "
        r'127\.0\.0\.1 - - .*"GET /through-syslog HTTP/1\.1" 200 2 .*\x00',
        access,
    ), access


def test_syslog_unix_datagram_error_log_only(start_server, tmp_path):
    """--disable-redirect-access-to-syslog: the error log goes to syslog, access lines
    stay in their file; JSON lines are the message after the tag."""
    path = str(tmp_path / "log.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    access = tmp_path / "access.log"
    with receiver:
        server = start_server(
            "--syslog",
            "--syslog-addr",
            f"unix://{path}#dgram",
            "--disable-redirect-access-to-syslog",
            "--log-format",
            "json",
            "--access-logfile",
            str(access),
            "logs_app:app",
        )
        server.get("/not-in-syslog")
        wait_until(lambda: access.exists() and "/not-in-syslog" in access.read_text())
        server.stop()
        receiver.settimeout(5)
        got = []
        try:
            while True:
                got.append(receiver.recv(65536).decode())
        except TimeoutError:
            pass
    assert got and not any("/not-in-syslog" in g for g in got)
    messages = []
    for g in got:
        m = re.fullmatch(r"<(\d+)>supervise\.logs_app\.app\.error: \[(\d+)\] (\{.*\})\x00", g)
        assert m, g
        assert int(m.group(1)) // 8 == 1  # the user facility by default
        messages.append(json.loads(m.group(3))["message"])
    assert any(m.startswith("Starting supervise") for m in messages)
    assert any(m.startswith("Shutting down") or "exiting" in m.lower() for m in messages)


def test_capture_output_beside_json_lines(start_server, tmp_path):
    """What the app prints lands in the error log file as it was printed, between the
    server's own JSON lines."""
    error = tmp_path / "error.log"
    server = start_server(
        "--capture-output", "--log-format", "json", "--error-logfile", str(error), "logs_app:app"
    )
    server.get("/print")
    wait_until(lambda: "printed to stderr by the app" in error.read_text())
    lines = error.read_text().splitlines()
    assert "printed to stdout by the app" in lines and "printed to stderr by the app" in lines
    others = [json.loads(line) for line in lines if not line.startswith("printed")]
    assert any(o["message"].startswith("Booting worker") for o in others)


def test_syslog_facility_codes_agree_with_the_standard_library():
    # supervise writes the table out so that the master need not import
    # logging.handlers; a name or code that drifted would log to the wrong facility.
    from logging.handlers import SysLogHandler

    from supervise.settings_logs import SYSLOG_FACILITIES

    assert SysLogHandler.facility_names == SYSLOG_FACILITIES
