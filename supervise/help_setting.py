"""``supervise --help-setting NAME``: one setting's full description, offline.

``--help`` shows only each option's first sentence, and docs/settings.md is not
part of an installed package; this prints what that page says about one
setting, from the same table it is generated from.
"""

from __future__ import annotations

import textwrap

from supervise.config_notices import close_setting
from supervise.gunicorn_only import gunicorn_only
from supervise.settings import SETTINGS, Setting
from supervise.validators import ConfigError

WIDTH = 79


def _flags(setting: Setting) -> list[str]:
    flags = list(setting.flags)
    if setting.action == "toggle":
        flags += [f"--no-{f[2:]}" for f in setting.flags if f.startswith("--")]
    return flags


def find(query: str) -> Setting:
    """The setting ``query`` names: its config-file name (any case, ``-`` for ``_``)
    or one of its options. ConfigError with a hint otherwise."""
    text = query.strip()
    if text in SETTINGS:
        return SETTINGS[text]
    for setting in SETTINGS.values():
        if text in _flags(setting):
            return setting
    name = text.lstrip("-").replace("-", "_").lower()
    if name in SETTINGS:
        return SETTINGS[name]
    entry = gunicorn_only(name, SETTINGS)
    if entry is not None:
        raise ConfigError(f"{name} is a Gunicorn setting supervise does not have: {entry.reason}")
    meant = close_setting(name)
    hint = f" (did you mean {meant}?)" if meant else ""
    raise ConfigError(f"no setting named {query!r}{hint}")


def describe(query: str) -> str:
    """The text ``--help-setting`` prints."""
    setting = find(query)
    plain = setting.help.replace("`", "")
    meta = (
        "" if setting.action in ("store_true", "store_false", "toggle") else f" {setting.metavar}"
    )
    if setting.flags:
        command_line = ", ".join(f"{flag}{meta}" for flag in _flags(setting))
    else:
        command_line = "none (config file only)"
    default = setting.default_doc if setting.default_doc is not None else repr(setting.default)
    rows = [
        ("Config file", f"{setting.name} = ..."),
        ("Command line", command_line),
        ("Type", setting.validator.kind),
        ("Default", default.replace("`", "")),
        ("Section", setting.section),
    ]
    if setting.env:
        rows.append(("Environment", f"{setting.env} supplies the default"))
    lines = [setting.name]
    for label, value in rows:
        lines += textwrap.wrap(
            value,
            WIDTH,
            initial_indent=f"  {label + ':':<14}",
            subsequent_indent=" " * 16,
        )
    lines.append("")
    lines += textwrap.wrap(plain, WIDTH, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines) + "\n"
