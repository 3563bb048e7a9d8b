"""The error log and the access log, in Gunicorn's formats.

Error log lines look like ``[2026-11-22 10:00:00 +0000] [PID] [INFO] message``.
Access lines follow ``access_log_format`` with Gunicorn's atoms. The format is
compiled once per ``setup()`` into one %-template plus a tuple of getters, so
that a request costs one getter call per atom used and a single string format,
never a dict of every atom.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from supervise import _native, log_config, log_json
from supervise.config import ConfigError
from supervise.log_writer import LineWriter

ERROR_LOGGER = "supervise.error"
ACCESS_LOGGER = "supervise.access"
ERROR_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S %z"

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

# (resp, environ, request_time_seconds) -> the atom's value
Getter = Callable[[Any, Mapping[str, Any], float], Any]
# (resp, environ, request_time_seconds) -> one access line, without its newline
LineFormat = Callable[[Any, Mapping[str, Any], float], str]


# --------------------------------------------------------------------------- access atoms

# Request data is attacker-controlled: escape what could forge or break a log line.
_UNSAFE = re.compile(r'["\\\x00-\x1f\x7f]')


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    if c == '"':
        return '\\"'
    if c == "\\":
        return "\\\\"
    return f"\\x{ord(c):02x}"


def escape(value: str) -> str:
    if _UNSAFE.search(value) is None:
        return value
    return _UNSAFE.sub(_escape_char, value)


def _environ_atom(key: str, default: str = "-") -> Getter:
    def get(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
        value = environ.get(key)
        return escape(value) if value else default

    return get


_time_cache: tuple[int, str] = (0, "")


def time_text(now: int) -> str:
    """The ``t`` atom for the second ``now``."""
    return time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(now))


def _atom_t(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
    # One strftime per second at most; a tuple is swapped in whole, so threads never
    # see a second that does not match its text.
    global _time_cache
    now = int(time.time())
    cached = _time_cache
    if cached[0] != now:
        cached = (now, time_text(now))
        _time_cache = cached
    return cached[1]


def _atom_r(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
    uri = environ.get("RAW_URI")
    if uri is None:
        uri = environ.get("PATH_INFO", "")
        if environ.get("QUERY_STRING"):
            uri = f"{uri}?{environ['QUERY_STRING']}"
    line = f"{environ.get('REQUEST_METHOD', '-')} {uri} {environ.get('SERVER_PROTOCOL', '-')}"
    return escape(line)


def basic_auth_user(environ: Mapping[str, Any]) -> str | None:
    auth = environ.get("HTTP_AUTHORIZATION")
    if not auth:
        return None
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("latin-1")
    except (binascii.Error, ValueError):
        return None
    return decoded.partition(":")[0] or None


def _atom_u(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
    user = basic_auth_user(environ)
    return escape(user) if user else "-"


def _status_code(resp: Any) -> int | str:
    code = getattr(resp, "status_code", None)
    if code is not None:
        return code
    status = getattr(resp, "status", None)
    return str(status).split(" ", 1)[0] if status else "-"


def _sent(resp: Any) -> int:
    return getattr(resp, "sent", None) or 0


def _atom_b(resp: Any, environ: Mapping[str, Any], rt: float) -> int | str:
    sent = getattr(resp, "sent", None)
    return "-" if sent is None else sent


_SIMPLE: dict[str, Getter] = {
    "h": _environ_atom("REMOTE_ADDR"),
    "l": lambda resp, environ, rt: "-",
    "u": _atom_u,
    "t": _atom_t,
    "r": _atom_r,
    "m": _environ_atom("REQUEST_METHOD"),
    "U": _environ_atom("PATH_INFO"),
    "q": _environ_atom("QUERY_STRING", default=""),
    "H": _environ_atom("SERVER_PROTOCOL"),
    "s": lambda resp, environ, rt: _status_code(resp),
    "B": lambda resp, environ, rt: _sent(resp),
    "b": _atom_b,
    "f": _environ_atom("HTTP_REFERER"),
    "a": _environ_atom("HTTP_USER_AGENT"),
    "T": lambda resp, environ, rt: int(rt),
    "M": lambda resp, environ, rt: int(rt * 1000),
    "D": lambda resp, environ, rt: int(rt * 1_000_000),
    "L": lambda resp, environ, rt: f"{rt:.6f}",
    "p": lambda resp, environ, rt: f"<{os.getpid()}>",
}


def _request_header(name: str) -> Getter:
    key = name.upper().replace("-", "_")
    if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        key = "HTTP_" + key
    return _environ_atom(key)


def _response_header(name: str) -> Getter:
    name = name.lower()

    def get(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
        found = None
        for key, value in getattr(resp, "headers", None) or ():
            if key.lower() == name:
                found = value  # the last one wins, as in Gunicorn
        return escape(found) if found else "-"

    return get


def _variable(name: str) -> Getter:
    """A process environment variable (Gunicorn), else a WSGI environ key."""
    upper = name.upper()

    def get(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
        value = os.environ.get(name) or os.environ.get(upper)
        if value is None:
            value = environ.get(name) or environ.get(upper)
        return escape(str(value)) if value else "-"

    return get


def _atom(key: str) -> Getter:
    if key in _SIMPLE:
        return _SIMPLE[key]
    m = re.fullmatch(r"\{([^}]*)\}([ioe])", key, re.IGNORECASE)
    if m:
        name, kind = m.group(1), m.group(2).lower()
        if kind == "i":
            return _request_header(name)
        if kind == "o":
            return _response_header(name)
        return _variable(name)
    return lambda resp, environ, rt: "-"  # unknown atoms print "-", as in Gunicorn


_PLACEHOLDER = re.compile(r"%\((?P<key>[^)]*)\)(?P<spec>[-#0 +]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa])")


# (literal text before it, key, spec, getter) for each placeholder
AccessPiece = tuple[str, str, str, Getter]


def access_pieces(fmt: str) -> tuple[list[AccessPiece], str]:
    """Split ``fmt`` into its placeholders and the literal text after the last one.
    Literal text keeps a "%%" as one "%", and any other "%" stays literal."""
    pieces: list[AccessPiece] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(fmt):
        literal = fmt[pos : m.start()].replace("%%", "%")
        pieces.append((literal, m.group("key"), m.group("spec"), _atom(m.group("key"))))
        pos = m.end()
    return pieces, fmt[pos:].replace("%%", "%")


def compile_access_format(fmt: str) -> tuple[str, tuple[Getter, ...]]:
    """``fmt`` as one %-template with positional placeholders and its getters: the
    reference the native formatter is tested against (tests/test_access_format.py)."""
    pieces, tail = access_pieces(fmt)
    template = [literal.replace("%", "%%") + "%" + spec for literal, _, spec, _ in pieces]
    return "".join(template) + tail.replace("%", "%%"), tuple(p[3] for p in pieces)


def access_line_format(cfg: Any) -> LineFormat:
    """The function that makes access lines for these settings (log_format). Text lines
    are made natively (native/src/py/access_format.rs): the getters above are the
    reference, and the native formatter calls them for what it does not read itself."""
    if cfg.log_format == "json":

        def json_line(resp: Any, environ: Mapping[str, Any], rt: float) -> str:
            status, user = _status_code(resp), basic_auth_user(environ)
            return log_json.access_line(resp, environ, rt, status=status, user=user)

        return json_line
    pieces, tail = access_pieces(cfg.access_log_format)
    return _native.AccessFormat(pieces, tail, time_text)


class AccessResponse:
    """A response the native server answered, as the access log atoms read it."""

    __slots__ = ("headers", "sent", "status", "status_code")

    def __init__(self, status: int, sent: int | None, headers: Any) -> None:
        self.status_code = status or None
        self.status = str(status) if status else "-"
        self.sent = sent
        self.headers: list[tuple[str, str]] = list(headers or ())


# --------------------------------------------------------------------------- Logger


def reopen_file(handler: Any) -> None:
    """Reopen a FileHandler's file by name (after logrotate renamed it)."""
    handler.acquire()
    try:
        if handler.stream:
            handler.stream.flush()
            handler.stream.close()
        handler.stream = open(  # noqa: SIM115 - the handler owns it
            handler.baseFilename,
            handler.mode,
            encoding=handler.encoding,
            errors=handler.errors,
        )
    finally:
        handler.release()


class Logger:
    """The server's logger: ``log.info(...)`` for the error log, ``log.access(...)`` per
    request. Re-apply settings with ``setup(cfg)`` (SIGHUP); ``reopen_files()`` (SIGUSR1)
    reopens log files after logrotate moved them."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.error_log = logging.getLogger(ERROR_LOGGER)
        self.access_log = logging.getLogger(ACCESS_LOGGER)
        self._capture: IO[str] | None = None
        self._access_line: LineFormat | None = None
        self._line_for_request: Callable[[Any, Any, str, float], str] | None = None
        # The access handler supervise owns (none when the user's config or syslog
        # takes access lines), and once a worker asks for it, the thread writing to it.
        self._own_access_handler: logging.Handler | None = None
        self._writer: LineWriter | None = None
        self._write_access: Callable[[str], None] | None = None
        # Counts calls by level (scoreboard.LOG_LEVELS index) for the metrics:
        # the master's record in the master, the worker's slot in a worker.
        self.count: Callable[[int], None] | None = None
        self.setup(cfg)

    # -- error log

    def debug(self, msg: str, *args: Any, **kw: Any) -> None:
        self.error_log.debug(msg, *args, **kw)

    def info(self, msg: str, *args: Any, **kw: Any) -> None:
        self.error_log.info(msg, *args, **kw)

    def warning(self, msg: str, *args: Any, **kw: Any) -> None:
        self.error_log.warning(msg, *args, **kw)
        if self.count is not None:
            self.count(2)

    def error(self, msg: str, *args: Any, **kw: Any) -> None:
        self.error_log.error(msg, *args, **kw)
        if self.count is not None:
            self.count(1)

    def critical(self, msg: str, *args: Any, **kw: Any) -> None:
        self.error_log.critical(msg, *args, **kw)
        if self.count is not None:
            self.count(0)

    def exception(self, msg: str, *args: Any, **kw: Any) -> None:
        self.error_log.exception(msg, *args, **kw)
        if self.count is not None:
            self.count(3)

    def log(self, level: int | str, msg: str, *args: Any, **kw: Any) -> None:
        if isinstance(level, str):
            level = LEVELS.get(level.lower(), logging.INFO)
        self.error_log.log(level, msg, *args, **kw)

    # -- access log

    def access(self, resp: Any, req: Any, environ: Mapping[str, Any], request_time: float) -> None:
        """Log one request. ``req`` may be None: everything comes from the WSGI environ
        and the response (``status``, ``status_code``, ``headers``, ``sent``)."""
        make_line = self._access_line
        if make_line is None:
            return
        try:
            line = make_line(resp, environ, request_time)
        except Exception:
            self.error_log.exception("Cannot format the access log line")
            return
        self._emit(line)

    def access_request(self, resp: Any, request: Any, remote: str, request_time: float) -> None:
        """``access`` for a request head parsed natively (a ``_native.Request``) on a
        connection from ``remote``: the environ the atoms read is that of
        ``request.wsgi_environ({"REMOTE_ADDR": remote})``, which text lines never build
        unless a placeholder needs a Python getter."""
        make_line = self._access_line
        if make_line is None:
            return
        try:
            if self._line_for_request is not None:
                line = self._line_for_request(resp, request, remote, request_time)
            else:
                environ = request.wsgi_environ({"REMOTE_ADDR": remote})
                line = make_line(resp, environ, request_time)
        except Exception:
            self.error_log.exception("Cannot format the access log line")
            return
        self._emit(line)

    def native_access(self) -> _native.AccessLog | None:
        """The access log for the native server to write itself (text lines made
        natively from the head it parsed, handed to ``_emit``); None when lines are
        off or in another format, which ``access`` then makes."""
        line = self._access_line
        if not isinstance(line, _native.AccessFormat):
            return None
        return _native.AccessLog(
            format=line, emit=self._emit, failed=self._access_failed, make_response=AccessResponse
        )

    def _access_failed(self, exc: BaseException) -> None:
        self.error_log.error("Cannot format the access log line", exc_info=exc)

    def _emit(self, line: str) -> None:
        write = self._write_access
        if write is not None:
            write(line + "\n")
        else:
            self.access_log.info(line)

    @property
    def access_enabled(self) -> bool:
        """Whether access lines go anywhere: workers skip timing and logging otherwise."""
        return self._access_line is not None

    def start_background_writes(self) -> None:
        """In a worker, after fork: access lines to supervise's own handler are then
        written by a thread (log_writer), never by the request path. With the user's
        logging config or syslog, lines keep going through logging, in the worker."""
        handler = self._own_access_handler
        if handler is None or self._writer is not None:
            return
        self._writer = LineWriter(handler, on_dropped=self._report_dropped, reopen=reopen_file)
        self._write_access = self._writer.write

    def stop_background_writes(self, timeout: float = 2.0) -> None:
        """Write the pending access lines (a worker about to exit); waits ``timeout``
        at most for a write blocked on a stuck disk or pipe."""
        writer, self._writer, self._write_access = self._writer, None, None
        if writer is not None and not writer.close(timeout):
            self.error_log.warning(
                "Access log lines lost at exit: the access log was not writable for %ss",
                timeout,
            )

    def _report_dropped(self, count: int) -> None:
        self.warning(
            "%d access log line(s) dropped: the access log could not keep up "
            "(a slow disk or a full pipe)",
            count,
        )

    # -- configuration

    def setup(self, cfg: Any) -> None:
        """(Re)build handlers from the settings. Raises ConfigError when a log file cannot
        be opened."""
        self.cfg = cfg
        self.error_log = logging.getLogger(ERROR_LOGGER)
        self.access_log = logging.getLogger(ACCESS_LOGGER)
        for logger in (self.error_log, self.access_log):
            self._drop_handlers(logger)
            logger.propagate = False

        self._own_access_handler = None
        json_lines = cfg.log_format == "json"

        self.error_log.setLevel(LEVELS.get(cfg.loglevel, logging.INFO))
        handler = self._handler(cfg.errorlog, sys.stderr)
        if json_lines:
            handler.setFormatter(log_json.JSONFormatter())
        else:
            handler.setFormatter(logging.Formatter(ERROR_FORMAT, DATE_FORMAT))
        self.error_log.addHandler(handler)

        self.access_log.setLevel(logging.INFO)
        access_on = bool(cfg.accesslog)
        if access_on:
            handler = self._handler(cfg.accesslog, sys.stdout)
            handler.setFormatter(logging.Formatter("%(message)s"))
            self.access_log.addHandler(handler)
            self._own_access_handler = handler

        if cfg.syslog:
            message = log_json.JSONFormatter() if json_lines else logging.Formatter("%(message)s")
            self.error_log.addHandler(log_config.syslog_handler(cfg, "error", message))
            if not cfg.disable_redirect_access_to_syslog:
                plain = logging.Formatter("%(message)s")
                self.access_log.addHandler(log_config.syslog_handler(cfg, "access", plain))
                access_on = True
                self._own_access_handler = None

        self._capture_output()

        configured = log_config.apply_user_config(cfg)
        if configured is not None:
            access_on = True  # the user's handlers decide where access lines go
            self._own_access_handler = None
            # A config written for Gunicorn configures gunicorn.error / gunicorn.access:
            # log through those loggers so that it keeps working unchanged.
            if "gunicorn.error" in configured and ERROR_LOGGER not in configured:
                self.error_log = logging.getLogger("gunicorn.error")
            if "gunicorn.access" in configured and ACCESS_LOGGER not in configured:
                self.access_log = logging.getLogger("gunicorn.access")

        self._access_line = access_line_format(cfg) if access_on else None
        line = self._access_line
        self._line_for_request = (
            line.for_request if isinstance(line, _native.AccessFormat) else None
        )

    def reopen_files(self) -> None:
        """Reopen every log file by name (after logrotate renamed it)."""
        writer = self._writer
        for logger in (self.error_log, self.access_log):
            for handler in logger.handlers:
                if not isinstance(handler, logging.FileHandler):
                    continue
                if writer is not None and handler is writer.handler:
                    # Its thread reopens it: a write blocked on a stuck disk holds the
                    # handler's lock, and this runs in a signal handler.
                    writer.reopen()
                    continue
                reopen_file(handler)
                self._chown(handler.baseFilename)
        self._capture_output()

    def close(self) -> None:
        """Close the handlers of supervise's loggers (tests, shutdown)."""
        self.stop_background_writes()
        names = {ERROR_LOGGER, ACCESS_LOGGER, self.error_log.name, self.access_log.name}
        for name in names:
            self._drop_handlers(logging.getLogger(name))
        if self._capture is not None:
            self._capture.close()
            self._capture = None

    # -- helpers

    @staticmethod
    def _drop_handlers(logger: logging.Logger) -> None:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            # A StreamHandler's close() leaves its stream (sys.stdout/stderr) open;
            # files and syslog sockets are closed.
            handler.flush()
            handler.close()

    def _handler(self, target: str, stream: IO[str]) -> logging.Handler:
        if target == "-":
            return logging.StreamHandler(stream)
        try:
            handler = logging.FileHandler(target, mode="a", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot open log file {target!r}: {exc.strerror or exc}") from None
        self._chown(handler.baseFilename)
        return handler

    def _chown(self, path: str) -> None:
        # Workers switch to cfg.user; they must still be able to reopen the files on USR1.
        if os.geteuid() != 0:
            return
        uid, gid = self.cfg.uid, self.cfg.gid
        if (uid, gid) == (0, 0):
            return
        with contextlib.suppress(OSError):
            os.chown(path, uid, gid)

    def _capture_output(self) -> None:
        """With capture_output, point fds 1 and 2 at the error log file, so that print()s
        and C-level writes of the application land there too."""
        old = self._capture
        self._capture = None
        if self.cfg.capture_output and self.cfg.errorlog != "-":
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            try:
                capture = open(self.cfg.errorlog, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
            except OSError as exc:
                raise ConfigError(
                    f"cannot open log file {self.cfg.errorlog!r}: {exc.strerror or exc}"
                ) from None
            os.dup2(capture.fileno(), 1)
            os.dup2(capture.fileno(), 2)
            self._capture = capture
        if old is not None:
            old.close()
