"""The user's logging configuration (logconfig_dict, logconfig_json, logconfig)
and syslog handlers, applied by ``Logger.setup`` on top of supervise's own
handlers, in Gunicorn's order of precedence: the dict, else the JSON file, else
the ini file.

logging.config, configparser and logging.handlers are imported by the function
that uses them: every master imports this module, few use them, and they bring
socketserver, pickle and queue with them."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from supervise.config import ConfigError
from supervise.settings_logs import SYSLOG_FACILITIES, parse_syslog_addr
from supervise.validators import Invalid


def apply_user_config(cfg: Any) -> set[str] | None:
    """Apply the configuration the settings name; the names of the loggers it
    configures, or None when there is none. Raises ConfigError."""
    if cfg.logconfig_dict:
        return _apply_dict(cfg.logconfig_dict, "logconfig_dict")
    if cfg.logconfig_json:
        path = os.path.abspath(cfg.logconfig_json)
        try:
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
        except OSError as exc:
            raise ConfigError(f"cannot read logconfig_json {path!r}: {exc.strerror}") from None
        except ValueError as exc:
            raise ConfigError(f"logconfig_json {path!r} is not valid JSON: {exc}") from None
        if not isinstance(config, dict):
            raise ConfigError(f"logconfig_json {path!r} must hold a JSON object")
        return _apply_dict(config, "logconfig_json")
    if cfg.logconfig:
        return _apply_file(os.path.abspath(cfg.logconfig))
    return None


def _apply_dict(config: Mapping[str, Any], name: str) -> set[str]:
    import logging.config

    config = dict(config)
    config.setdefault("version", 1)
    # Without this, dictConfig would silence supervise's own loggers.
    config.setdefault("disable_existing_loggers", False)
    try:
        logging.config.dictConfig(config)
    except (ValueError, TypeError, AttributeError, ImportError) as exc:
        raise ConfigError(f"invalid value for {name}: {exc}") from None
    return set(config.get("loggers") or {})


def _apply_file(path: str) -> set[str]:
    import configparser
    import logging.config

    if not os.path.exists(path):
        raise ConfigError(f"log config {path!r} not found")
    # %(here)s and %(__file__)s in the file name the file's folder and itself, as
    # in Gunicorn (and Paste's ini files).
    defaults = {"__file__": path, "here": os.path.dirname(path)}
    try:
        logging.config.fileConfig(path, defaults=defaults, disable_existing_loggers=False)
    except (configparser.Error, KeyError, ValueError, TypeError, ImportError, OSError) as exc:
        raise ConfigError(f"invalid log config {path!r}: {exc!r}") from None
    return _ini_logger_names(path, defaults)


def _ini_logger_names(path: str, defaults: dict[str, str]) -> set[str]:
    import configparser

    parser = configparser.ConfigParser(defaults)
    parser.read(path, encoding="utf-8")
    keys = [k.strip() for k in parser.get("loggers", "keys", fallback="").split(",")]
    names = set()
    for key in filter(None, keys):
        names.add(parser.get(f"logger_{key}", "qualname", fallback=key))
    return names


def syslog_handler(cfg: Any, name: str, formatter: logging.Formatter) -> logging.Handler:
    """A SysLogHandler to cfg.syslog_addr, each message tagged
    ``supervise.PREFIX.NAME: [PID] `` as Gunicorn tags its own."""
    from logging.handlers import SysLogHandler

    try:
        address, socktype = parse_syslog_addr(cfg.syslog_addr)
    except Invalid as exc:
        raise ConfigError(f"invalid syslog_addr: {exc}") from None
    prefix = cfg.syslog_prefix or cfg.proc_name.replace(":", ".")
    try:
        handler = SysLogHandler(
            address=address,
            facility=SYSLOG_FACILITIES[cfg.syslog_facility],
            socktype=socktype,  # type: ignore[arg-type] # None: try both (unix)
        )
    except OSError as exc:
        raise ConfigError(f"cannot reach syslog at {cfg.syslog_addr}: {exc}") from None
    handler.setFormatter(_Tagged(f"supervise.{prefix}.{name}: [%(process)d] ", formatter))
    return handler


class _Tagged(logging.Formatter):
    """Another formatter's text after a syslog tag (which must come first)."""

    def __init__(self, tag: str, inner: logging.Formatter) -> None:
        super().__init__()
        self.tag = tag
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return self.tag % {"process": record.process} + self.inner.format(record)
