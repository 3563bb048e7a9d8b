"""The Logging settings: the access and error logs, their level and formats, a
logging config file (ini or JSON), the built-in JSON line format, and syslog.

Apart from settings.py only to keep that table readable; settings.py names the
section and includes them in its place. Names and flags are Gunicorn's (logconfig,
logconfig_json, syslog, syslog_addr, syslog_prefix, syslog_facility,
disable_redirect_access_to_syslog), so a gunicorn.conf.py keeps working; the
shorter flags (--logconfig, --syslog-addr, ...) are aliases.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any

from supervise.validators import BOOL, DICT, OPT_STR, STR, Check, Invalid, choice_check

DEFAULT_ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'

SYSLOG_PORT = 514

# The facility codes of RFC 5424 6.2.1 by the names SysLogHandler knows
# (Gunicorn's, and a few more). Written out, not read from
# SysLogHandler.facility_names: logging.handlers brings pickle, socketserver
# and queue into the master, which most deployments never use
# (tests/test_syslog.py checks that the two tables agree).
SYSLOG_FACILITIES: dict[str, int] = {
    "auth": 4,
    "authpriv": 10,
    "console": 14,
    "cron": 9,
    "daemon": 3,
    "ftp": 11,
    "kern": 0,
    "lpr": 6,
    "mail": 2,
    "news": 7,
    "ntp": 12,
    "security": 13,
    "solaris-cron": 15,
    "syslog": 5,
    "user": 1,
    "uucp": 8,
    **{f"local{n}": 16 + n for n in range(8)},
}


def default_syslog_addr(platform: str = sys.platform) -> str:
    """Where the local syslog listens, per platform (Gunicorn's defaults)."""
    if platform == "darwin":
        return "unix:///var/run/syslog"
    if platform.startswith(("freebsd", "dragonfly")):
        return "unix:///var/run/log"
    if platform.startswith("openbsd"):
        return "unix:///dev/log"
    return "udp://localhost:514"


def parse_syslog_addr(text: str) -> tuple[str | tuple[str, int], int | None]:
    """``udp://HOST:PORT``, ``tcp://HOST:PORT`` or ``unix://PATH[#dgram|#stream]`` ->
    (address, socket type) for SysLogHandler. A unix socket's type None lets the
    handler try datagram then stream, as the local syslog may be either."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("udp", "tcp", "unix"):
        raise Invalid(f"{text!r}: write udp://HOST:PORT, tcp://HOST:PORT or unix://PATH")
    if scheme == "unix":
        path, _, kind = rest.partition("#")
        if not path:
            raise Invalid(f"{text!r}: unix:// needs a path")
        if kind not in ("", "dgram", "stream"):
            raise Invalid(f"{text!r}: the socket type after # is dgram or stream")
        types = {"": None, "dgram": socket.SOCK_DGRAM, "stream": socket.SOCK_STREAM}
        return path, types[kind]
    if rest.startswith("["):
        host, bracket, port_text = rest[1:].partition("]")
        if not bracket or (port_text and not port_text.startswith(":")):
            raise Invalid(f"{text!r}: write an IPv6 address as [ADDRESS]:PORT")
        port_text = port_text[1:]
    else:
        host, _, port_text = rest.partition(":")
    if port_text and (not port_text.isdigit() or int(port_text) > 65535):
        raise Invalid(f"{text!r}: the port must be a number from 0 to 65535")
    kind = socket.SOCK_DGRAM if scheme == "udp" else socket.SOCK_STREAM
    return (host or "localhost", int(port_text) if port_text else SYSLOG_PORT), kind


def _syslog_addr(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"{value!r} is not a syslog address")
    text = value.strip()
    parse_syslog_addr(text)
    return text


SYSLOG_ADDRESS = Check("str", _syslog_addr)


def declare(add: Callable[..., None]) -> None:
    """The Logging section: the files and level, then the formats, logging
    config files and syslog."""
    add(
        name="accesslog",
        flags=["--access-logfile"],
        metavar="FILE",
        validator=OPT_STR,
        help="Write one line per request to this file, `-` meaning stdout; no access log "
        "is written when it is not set.",
    )
    add(
        name="access_log_format",
        flags=["--access-logformat"],
        metavar="FORMAT",
        validator=STR,
        default=DEFAULT_ACCESS_LOG_FORMAT,
        help="The format of access log lines. It uses Gunicorn's atoms, written "
        "`%(NAME)s`: `h` remote address, `l` `-`, `u` user name (basic auth), `t` time, "
        "`r` request line, `m` method, `U` path, `q` query string, `H` protocol, `s` status, "
        "`B` body bytes "
        "sent, `b` the same or `-`, `f` referer, `a` user agent, `T` request time in "
        "seconds, `M` in milliseconds, `D` in microseconds, `L` in decimal seconds, `p` "
        "process id, `{header}i` a request header, `{header}o` a response header and "
        "`{name}e` an environment variable (else a WSGI environ key). Unknown atoms print "
        "`-`; quotes and control characters in values are escaped.",
    )
    add(
        name="errorlog",
        flags=["--error-logfile", "--log-file"],
        metavar="FILE",
        validator=STR,
        default="-",
        help="Where the server's own messages go: a file, or `-` for stderr.",
    )
    add(
        name="loglevel",
        flags=["--log-level"],
        metavar="LEVEL",
        validator=choice_check("debug", "info", "warning", "error", "critical"),
        default="info",
        help="The least severe error-log messages written: `debug`, `info`, `warning`, "
        "`error` or `critical`.",
    )
    add(
        name="capture_output",
        flags=["--capture-output"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Send what the application prints to stdout and stderr to the error log file "
        "(only when errorlog is a file).",
    )
    add(
        name="logconfig_dict",
        validator=DICT,
        default={},
        help="A `logging.config.dictConfig` dictionary applied after supervise has set up "
        "its loggers, `supervise.error` and `supervise.access`. `version: 1` and "
        "`disable_existing_loggers: False` are filled in when missing. A Gunicorn "
        "dictionary that configures `gunicorn.error` / `gunicorn.access` (and not the "
        "supervise names) is honoured: supervise then logs through those loggers. When "
        "set, access lines are emitted even without accesslog, for your handlers to "
        "route.",
    )
    add(
        name="logconfig",
        flags=["--log-config", "--logconfig"],
        metavar="FILE",
        validator=OPT_STR,
        default=None,
        help="A logging configuration file in the ini format of Python's "
        "`logging.config.fileConfig`, applied after supervise has set up its loggers "
        "(`supervise.error`, `supervise.access`; a file written for Gunicorn's "
        "`gunicorn.error` / `gunicorn.access` works too). Ignored when logconfig_dict or "
        "logconfig_json is set, as in Gunicorn. Access lines are then emitted even "
        "without accesslog, for your handlers to route.",
    )
    add(
        name="logconfig_json",
        flags=["--log-config-json", "--logconfig-json"],
        metavar="FILE",
        validator=OPT_STR,
        default=None,
        help="A JSON file holding a `logging.config.dictConfig` dictionary, treated as "
        "logconfig_dict is (which wins when both are set).",
    )
    add(
        name="log_format",
        flags=["--log-format"],
        metavar="FORMAT",
        validator=choice_check("text", "json"),
        default="text",
        help="`text`: Gunicorn's line formats (access_log_format for access lines). "
        "`json`: one JSON object per line. Access lines have the fields time, "
        "remote_addr, user, method, path, query, protocol, status, bytes, duration (seconds), "
        "referer, user_agent, pid and, when the request has an X-Request-ID header, "
        "request_id; error-log lines have time, level, logger, message, pid and, for an "
        "exception, exception (the traceback).",
    )
    add(
        name="syslog",
        flags=["--log-syslog", "--syslog"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Also send the error log, and the access log unless "
        "disable_redirect_access_to_syslog, to syslog at syslog_addr.",
    )
    add(
        name="syslog_addr",
        flags=["--log-syslog-to", "--syslog-addr"],
        metavar="SYSLOG_ADDR",
        validator=SYSLOG_ADDRESS,
        default=default_syslog_addr(),
        default_doc="`udp://localhost:514` on Linux; `unix:///var/run/syslog` on macOS, "
        "`unix:///var/run/log` on FreeBSD, `unix:///dev/log` on OpenBSD",
        help="Where syslog messages go: `udp://HOST:PORT`, `tcp://HOST:PORT` or "
        "`unix://PATH` (add `#dgram` or `#stream` to choose the socket type; without it "
        "both are tried), as Gunicorn's. On Linux the local syslog usually listens at "
        "`unix:///dev/log`.",
    )
    add(
        name="syslog_prefix",
        flags=["--log-syslog-prefix", "--syslog-prefix"],
        metavar="SYSLOG_PREFIX",
        validator=OPT_STR,
        default=None,
        default_doc="the process name (proc_name)",
        help="The program name in syslog entries: they are tagged "
        "`supervise.PREFIX.error` and `supervise.PREFIX.access`.",
    )
    add(
        name="syslog_facility",
        flags=["--log-syslog-facility", "--syslog-facility"],
        metavar="SYSLOG_FACILITY",
        validator=choice_check(*SYSLOG_FACILITIES),
        default="user",
        help="The syslog facility: `user`, `daemon`, `local0` to `local7`, ... (the names "
        "of Python's SysLogHandler).",
    )
    add(
        name="disable_redirect_access_to_syslog",
        flags=["--disable-redirect-access-to-syslog"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="With syslog, send only the error log there, not the access log.",
    )
