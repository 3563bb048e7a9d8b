"""Gunicorn settings that supervise knows of but does not have, and why.

A gunicorn.conf.py, GUNICORN_CMD_ARGS or a runbook brings these names along.
Without this table they would be dropped without a word (config file) or refused
as unknown options; with it the user is told what the setting did and what to
use instead. A name that becomes a supervise setting (another section adds it)
stops counting as Gunicorn-only by itself: ``gunicorn_only()`` checks the live
settings table, so this list never has to be edited in step with it.

Taken from Gunicorn's own settings (gunicorn/config.py, version 27), with its
flags, so that an option on a command line can be skipped with its value.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple


class GunicornOnly(NamedTuple):
    """One Gunicorn setting supervise does not have."""

    flags: tuple[str, ...]
    takes_value: bool  # whether the option consumes the next argument
    reason: str  # why supervise lacks it and what to use instead


def _opt(*flags: str, reason: str) -> GunicornOnly:
    return GunicornOnly(flags, True, reason)


def _switch(*flags: str, reason: str) -> GunicornOnly:
    return GunicornOnly(flags, False, reason)


_SYSLOG = (
    "supervise does not log to syslog itself; send the error log there with "
    "logconfig_dict and a logging.handlers.SysLogHandler, or let systemd's journal take "
    "stderr"
)
_STRICT = (
    "supervise's HTTP parser is strict and cannot be relaxed (a defence against request smuggling)"
)
_PASTE = "PasteDeploy is not supported; point supervise at the WSGI callable (MODULE:ATTRIBUTE)"
_UWSGI = "supervise speaks HTTP only, not the uwsgi protocol; put an HTTP proxy in front"
_DIRTY = "Gunicorn's dirty arbiter (workers for long tasks) has no counterpart in supervise"
_LOGCONFIG = "file-based logging config is not supported; use logconfig_dict"

TABLE: dict[str, GunicornOnly] = {
    "spew": _switch("--spew", reason="supervise does not trace every line it runs"),
    "tmp_upload_dir": _opt(reason="Gunicorn does not use it either"),
    "logger_class": _opt(
        "--logger-class",
        reason="supervise's logger is not replaceable; shape its output with "
        "access_log_format and logconfig_dict",
    ),
    "logconfig": _opt("--log-config", reason=_LOGCONFIG),
    "logconfig_json": _opt("--log-config-json", reason=_LOGCONFIG),
    "syslog": _switch("--log-syslog", reason=_SYSLOG),
    "syslog_addr": _opt("--log-syslog-to", reason=_SYSLOG),
    "syslog_prefix": _opt("--log-syslog-prefix", reason=_SYSLOG),
    "syslog_facility": _opt("--log-syslog-facility", reason=_SYSLOG),
    "disable_redirect_access_to_syslog": _switch(
        "--disable-redirect-access-to-syslog", reason=_SYSLOG
    ),
    "enable_backlog_metric": _switch(
        "--enable-backlog-metric",
        reason="not needed: with --metrics-bind the listen queue is always reported "
        "(supervise_listen_queue_length)",
    ),
    "default_proc_name": _opt(reason="Gunicorn sets it itself; set proc_name (-n) instead"),
    "paste": _opt("--paste", "--paster", reason=_PASTE),
    "raw_paste_global_conf": GunicornOnly(("--paste-global",), True, _PASTE),
    "proxy_protocol": _opt(
        "--proxy-protocol", reason="the PROXY protocol is not supported in this version"
    ),
    "protocol": _opt("--protocol", reason=_UWSGI),
    "uwsgi_allow_ips": _opt("--uwsgi-allow-from", reason=_UWSGI),
    "ssl_version": _opt(
        "--ssl-version",
        reason="deprecated in Gunicorn; supervise negotiates TLS 1.2 or newer (use "
        "ciphers or ssl_context to restrict it)",
    ),
    "http_protocols": _opt(
        "--http-protocols", reason="HTTP/2 is served by -k rsgi; choose versions with --http"
    ),
    "http2_cleartext": _opt(
        "--http2-cleartext",
        reason="-k rsgi speaks HTTP/2 in clear text with prior knowledge (--http auto or 2)",
    ),
    "http2_initial_window_size": _opt(
        "--http2-initial-window-size", reason="use http2_initial_stream_window_size (-k rsgi)"
    ),
    "http2_max_header_list_size": _opt(
        "--http2-max-header-list-size", reason="use http2_max_headers_size (-k rsgi)"
    ),
    "permit_obsolete_folding": _switch("--permit-obsolete-folding", reason=_STRICT),
    "strip_header_spaces": _switch("--strip-header-spaces", reason=_STRICT),
    "permit_unconventional_http_method": _switch(
        "--permit-unconventional-http-method", reason=_STRICT
    ),
    "permit_unconventional_http_version": _switch(
        "--permit-unconventional-http-version", reason=_STRICT
    ),
    "casefold_http_method": _switch("--casefold-http-method", reason=_STRICT),
    "forwarder_headers": _opt(
        "--forwarder-headers",
        reason="supervise takes no other headers from proxies than the scheme and client "
        "ones (forwarded_allow_ips); set SCRIPT_NAME with --root-path",
    ),
    "header_map": _opt(
        "--header-map",
        reason="supervise always drops header names containing '_' from the WSGI environ "
        "(Gunicorn's default, drop)",
    ),
    "asgi_loop": _opt("--asgi-loop", reason="use --loop (-k asgi)"),
    "asgi_lifespan": _opt("--asgi-lifespan", reason="use --lifespan (-k asgi)"),
    "asgi_disconnect_grace_period": _opt(
        "--asgi-disconnect-grace-period", reason="not configurable in supervise"
    ),
    "http_parser": _opt(
        "--http-parser", reason="supervise always uses its own native (Rust) parser"
    ),
    "dirty_apps": GunicornOnly(("--dirty-app",), True, _DIRTY),
    "dirty_workers": _opt("--dirty-workers", reason=_DIRTY),
    "dirty_timeout": _opt("--dirty-timeout", reason=_DIRTY),
    "dirty_threads": _opt("--dirty-threads", reason=_DIRTY),
    "dirty_graceful_timeout": _opt("--dirty-graceful-timeout", reason=_DIRTY),
    "on_dirty_starting": _opt(reason=_DIRTY),
    "dirty_post_fork": _opt(reason=_DIRTY),
    "dirty_worker_init": _opt(reason=_DIRTY),
    "dirty_worker_exit": _opt(reason=_DIRTY),
    "control_socket_mode": _opt(
        "--control-socket-mode",
        reason="supervise's control socket is always owner-only (0600)",
    ),
    "control_socket_disable": _switch(
        "--no-control-socket",
        reason="supervise's control socket is off unless --control-socket is given",
    ),
}


def gunicorn_only(name: str, settings: Collection[str]) -> GunicornOnly | None:
    """The entry for a Gunicorn setting supervise lacks, or None (also once supervise
    has a setting of that name)."""
    if name in settings:
        return None
    return TABLE.get(name)


def gunicorn_only_flags(
    settings: Collection[str], our_flags: Collection[str]
) -> dict[str, tuple[str, GunicornOnly]]:
    """Gunicorn's option strings for settings supervise lacks: flag -> (name, entry).
    A flag supervise's own parser has is left out, whatever setting it belongs to."""
    out: dict[str, tuple[str, GunicornOnly]] = {}
    for name, entry in TABLE.items():
        if name in settings:
            continue
        for flag in entry.flags:
            if flag not in our_flags:
                out[flag] = (name, entry)
    return out
