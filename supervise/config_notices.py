"""What the configuration loader tells the user besides errors: names it ignored,
Gunicorn settings supervise lacks, Gunicorn worker classes it read as its own,
and where the configuration came from.

``load_config`` (cli.py) collects these as ``Notice``s on ``Config.notices``
instead of printing them, because it runs before logging is set up and again on
every SIGHUP: the command decides where they go (stderr for --check-config and
--print-config, the error log once the arbiter runs, each text once per master).
"""

from __future__ import annotations

import enum
import types
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from supervise import worker_names
from supervise.gunicorn_only import gunicorn_only, gunicorn_only_flags
from supervise.settings import NOT_FROM_FILE, SETTINGS
from supervise.validators import ConfigError
from supervise.workers import WORKERS


class NoticeKind(enum.Enum):
    MISSPELT = "misspelt"  # not a setting, but close to one: fails --check-config
    GUNICORN_ONLY = "gunicorn-only"  # a Gunicorn setting supervise does not have
    UNKNOWN = "unknown"  # not a setting and not close to one (maybe a helper name)
    TRANSLATED = "translated"  # a Gunicorn/Uvicorn worker class run as supervise's own
    SOURCE = "source"  # where the configuration came from: information, not a warning


@dataclass(frozen=True)
class Notice:
    kind: NoticeKind
    text: str

    @property
    def is_warning(self) -> bool:
        return self.kind is not NoticeKind.SOURCE


class GunicornFlags(enum.Enum):
    """What to do with a Gunicorn option supervise lacks."""

    REFUSE = "refuse"  # typed on the command line just now: an error with the reason
    SKIP = "skip"  # in an environment variable set elsewhere: skipped with a warning


def _flag_names() -> dict[str, str]:
    """Config-file spellings a user may derive from a flag (``access_logfile`` from
    ``--access-logfile``) -> the setting's real name (``accesslog``)."""
    out: dict[str, str] = {}
    for setting in SETTINGS.values():
        for flag in setting.flags:
            if flag.startswith("--"):
                out.setdefault(flag[2:].replace("-", "_"), setting.name)
    return out


class Suggestion(NamedTuple):
    meant: str  # the setting
    kind: NoticeKind  # MISSPELT when surely a mistake, else UNKNOWN (maybe a helper)


def suggest_setting(name: str) -> Suggestion | None:
    """The setting a config-file name probably meant, or None.

    A name close to a setting's (``wokers``) is a misspelling. A name spelt as one of
    its options (``access_logfile`` for ``--access-logfile``) is one too when it has
    several words; a single word (``env``, ``name``, ``pid``) is as likely a helper.
    """
    lowered = name.lower()
    meant = _flag_names().get(lowered)
    if meant is not None and meant != name:  # before the fuzzy match: preload is not reload
        kind = NoticeKind.MISSPELT if "_" in lowered else NoticeKind.UNKNOWN
        return Suggestion(meant, kind)
    import difflib  # only for an unknown name: the master stays lighter

    match = difflib.get_close_matches(lowered, list(SETTINGS), n=1, cutoff=0.85)
    if match and match[0] != name:
        return Suggestion(match[0], NoticeKind.MISSPELT)
    return None


def close_setting(name: str) -> str | None:
    """The setting a misspelt or option-spelt name probably meant, or None."""
    found = suggest_setting(name)
    return found.meant if found else None


def close_option(option: str, options: Iterable[str]) -> str | None:
    """The option an unknown command-line option probably meant (``--wokers``)."""
    import difflib

    match = difflib.get_close_matches(option, [o for o in options if o != option], n=1, cutoff=0.8)
    return match[0] if match else None


def _is_helper(name: str, value: Any, module_name: str) -> bool:
    """Names in a config file that are plainly not meant as settings: private and
    constant-style names, imported modules and classes, functions imported from
    elsewhere (``from os import getenv``)."""
    if name.startswith("_") or name.isupper():
        return True
    if isinstance(value, types.ModuleType | type):
        return True
    return callable(value) and getattr(value, "__module__", module_name) != module_name


def file_notices(namespace: Mapping[str, Any], *, where: str) -> list[Notice]:
    """One notice per name in a config file that sets nothing; ``where`` names the file."""
    module_name = namespace.get("__name__", "__config__")
    notices = []
    for name, value in namespace.items():
        if name in SETTINGS:
            if name in NOT_FROM_FILE:
                notices.append(
                    Notice(
                        NoticeKind.UNKNOWN,
                        f"{name}{where}: ignored, a config file cannot choose the config file",
                    )
                )
            continue
        if _is_helper(name, value, module_name):
            continue
        entry = gunicorn_only(name, SETTINGS)
        if entry is not None:
            notices.append(
                Notice(
                    NoticeKind.GUNICORN_ONLY,
                    f"{name}{where}: a Gunicorn setting supervise does not have, ignored "
                    f"({entry.reason})",
                )
            )
            continue
        found = suggest_setting(name)
        if found is not None:
            notices.append(
                Notice(
                    found.kind,
                    f"{name}{where}: not a setting, ignored (did you mean {found.meant}?)",
                )
            )
        else:
            notices.append(
                Notice(
                    NoticeKind.UNKNOWN,
                    f"{name}{where}: not a setting, ignored (a helper name? start it with _ "
                    "to silence this)",
                )
            )
    return notices


def worker_class_notice(value: Any, *, where: str) -> Notice | None:
    """A notice when ``worker_class`` names Gunicorn's or Uvicorn's class that supervise
    runs as one of its own (the validator does the translating)."""
    if isinstance(value, type):
        name = f"{value.__module__}.{value.__qualname__}"
    elif isinstance(value, str):
        name = value.strip()
    else:
        return None
    found = worker_names.foreign(name, tuple(WORKERS))
    if not isinstance(found, worker_names.Translated) or found.to not in WORKERS:
        return None
    return Notice(
        NoticeKind.TRANSLATED,
        f"worker class {name!r}{where} is {found.whose}: supervise serves it with its own "
        f"{found.to} worker (write -k {found.to}, or worker_class = {found.to!r}, to "
        "silence this)",
    )


def split_gunicorn_only(
    args: list[str], *, our_flags: Collection[str], policy: GunicornFlags, where: str
) -> tuple[list[str], list[Notice]]:
    """``args`` without Gunicorn's options for settings supervise lacks (and their
    values), and a notice for each; with ``GunicornFlags.REFUSE`` the first one
    raises ConfigError instead. Their arity is known, so skipping one never takes
    the app or another option's value with it."""
    table = gunicorn_only_flags(SETTINGS, our_flags)
    kept: list[str] = []
    notices: list[Notice] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            kept.extend(args[i:])
            break
        flag, eq, _ = arg.partition("=")
        hit = table.get(flag) if arg.startswith("--") else None
        if hit is None:
            kept.append(arg)
            i += 1
            continue
        name, entry = hit
        text = f"{flag}{where} is Gunicorn's option for {name}, which supervise does not have"
        if policy is GunicornFlags.REFUSE:
            raise ConfigError(f"{text}: {entry.reason}")
        notices.append(Notice(NoticeKind.GUNICORN_ONLY, f"{text}; ignored ({entry.reason})"))
        i += 2 if entry.takes_value and not eq else 1
    return kept, notices


def unique(notices: Iterable[Notice]) -> tuple[Notice, ...]:
    """Each text once, in order (the same name may be met twice in one load)."""
    return tuple(dict.fromkeys(notices))
