"""The resolved configuration (``Config``) and the generated settings reference.

The settings themselves are declared once, in ``supervise.settings``; their
validators live in ``supervise.validators`` and the default server hooks in
``supervise.hooks``. This module re-exports what other code has always imported
from here, so ``from supervise.config import SETTINGS, Config, ConfigError`` keeps
working.

Regenerate the docs with ``python -m supervise.config --markdown > docs/settings.md``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from supervise.hooks import (
    child_exit,
    nworkers_changed,
    on_exit,
    on_reload,
    on_starting,
    post_fork,
    post_request,
    post_worker_init,
    pre_exec,
    pre_fork,
    pre_request,
    ssl_context,
    when_ready,
    worker_abort,
    worker_exit,
    worker_int,
)
from supervise.settings import (
    NOT_FROM_FILE,
    SECTIONS,
    SETTINGS,
    Setting,
)
from supervise.settings_logs import DEFAULT_ACCESS_LOG_FORMAT
from supervise.validators import Check, ConfigError, Invalid, hook_check

__all__ = [
    "DEFAULT_ACCESS_LOG_FORMAT",
    "NOT_FROM_FILE",
    "SECTIONS",
    "SETTINGS",
    "Check",
    "Config",
    "ConfigError",
    "Invalid",
    "Setting",
    "child_exit",
    "hook_check",
    "nworkers_changed",
    "on_exit",
    "on_reload",
    "on_starting",
    "post_fork",
    "post_request",
    "post_worker_init",
    "pre_exec",
    "pre_fork",
    "pre_request",
    "settings_markdown",
    "ssl_context",
    "when_ready",
    "worker_abort",
    "worker_exit",
    "worker_int",
]


class Config:
    """The resolved settings. Every setting is an attribute (``cfg.workers``)."""

    settings: Mapping[str, Setting] = SETTINGS
    # What load_config (cli.py) noticed besides errors: config_notices.Notice objects,
    # logged by the arbiter or printed by --check-config. Not a setting.
    notices: tuple[Any, ...] = ()

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        values = {s.name: s.default_value(environ) for s in SETTINGS.values()}
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(f"no setting named {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SETTINGS:
            self.set(name, value)
        else:
            object.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(SETTINGS))

    def __repr__(self) -> str:
        return f"<Config app={self.app_uri!r} workers={self.workers} k={self.worker_class!r}>"

    def set(self, name: str, value: Any) -> None:
        """Validate and store one setting; ConfigError when the value is not allowed."""
        setting = SETTINGS.get(name)
        if setting is None:
            raise ConfigError(f"unknown setting {name!r}")
        self._values[name] = setting.validate(value)

    def get(self, name: str) -> Any:
        if name not in SETTINGS:
            raise ConfigError(f"unknown setting {name!r}")
        return self._values[name]

    def items(self) -> Iterator[tuple[str, Any]]:
        """(name, value) for every setting, sorted by name."""
        for name in sorted(self._values):
            yield name, self._values[name]

    def copy(self) -> Config:
        clone = object.__new__(Config)
        object.__setattr__(clone, "_values", dict(self._values))
        object.__setattr__(clone, "notices", self.notices)
        return clone

    # -- derived values

    @property
    def app_uri(self) -> str | None:
        """The application reference: the APP argument, or wsgi_app from a config file."""
        return self._values["wsgi_app"]

    @property
    def env(self) -> dict[str, str]:
        """raw_env as a dict (validated to be KEY=VALUE already)."""
        return dict(item.split("=", 1) for item in self._values["raw_env"])

    @property
    def uid(self) -> int:
        return self._values["user"]

    @property
    def gid(self) -> int:
        return self._values["group"]

    @property
    def is_ssl(self) -> bool:
        return bool(self._values["certfile"] or self._values["keyfile"])

    @property
    def proc_name(self) -> str:
        return self._values["proc_name"] or self.app_uri or "supervise"

    @property
    def worker_class_str(self) -> str:
        """The worker class to run: the -k value, except that sync with threads > 1 means
        gthread, as in Gunicorn."""
        name = self._values["worker_class"]
        if name == "sync" and self._values["threads"] > 1:
            return "gthread"
        return name


# --------------------------------------------------------------------------- docs


def _doc_default(s: Setting) -> str:
    if s.default_doc is not None:
        return s.default_doc
    return f"`{s.default!r}`"


def _doc_flags(s: Setting) -> str:
    flags = list(s.flags)
    if s.action == "toggle":
        flags += [f"--no-{f[2:]}" for f in s.flags if f.startswith("--")]
    meta = "" if s.action in ("store_true", "store_false", "toggle") else f" {s.metavar}"
    return ", ".join(f"`{f}{meta}`" for f in flags)


def settings_markdown() -> str:
    """docs/settings.md, generated from SETTINGS."""
    out = [
        "# Settings",
        "",
        "<!-- Generated by `python -m supervise.config --markdown > docs/settings.md`;"
        " edit supervise/settings.py instead. -->",
        "",
        "Every setting can be given in a config file (`-c FILE`; a module-level name equal "
        "to the setting name sets it), and most on the command line. Precedence, highest "
        "first: the command line, the `SUPERVISE_CMD_ARGS` environment variable (parsed like "
        "a command line), Gunicorn's `GUNICORN_CMD_ARGS` (the same), the config file, the "
        "defaults. Names, flags and defaults follow Gunicorn's, so a gunicorn.conf.py works "
        "unchanged (and is read when there is no supervise.conf.py); names supervise does "
        "not know are ignored with a warning. `supervise --print-config` shows the resolved "
        "values and `supervise --help-setting NAME` prints one setting's section of this "
        "page.",
        "",
    ]
    native = [s for s in SETTINGS.values() if s.native]
    for section in SECTIONS:
        members = [s for s in SETTINGS.values() if s.section == section]
        out += [f"## {section}", ""]
        out += [", ".join(f"[{s.name}](#{s.name})" for s in members), ""]
        if section.startswith("Native Server"):
            # The native server reads these too; they stay in their sections
            # because the other workers read them as well.
            shared = [s for s in native if s.section != section]
            out += [
                "The native server also reads these, from other sections: "
                + ", ".join(f"[{s.name}](#{s.name})" for s in shared)
                + ".",
                "",
            ]
        for s in members:
            out += [f"### {s.name}", ""]
            if s.flags:
                out.append(f"- Command line: {_doc_flags(s)}")
            else:
                out.append("- Command line: none (config file only)")
            out.append(f"- Type: {s.validator.kind}")
            out.append(f"- Default: {_doc_default(s)}")
            out += ["", s.help, ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m supervise.config --markdown > docs/settings.md")
    sys.stdout.write(settings_markdown())
