"""Validators: turn a setting's value from any source into its normal form.

A validator takes a value from the command line or SUPERVISE_CMD_ARGS (a string)
or from a config file (any Python object) and returns the normalised value, or
raises Invalid with a short reason; ``Setting.validate`` adds the setting's name.
Each is wrapped in a ``Check`` that also carries the type name docs/settings.md
shows, so the two cannot drift apart.
"""

from __future__ import annotations

import grp
import importlib
import inspect
import ipaddress
import math
import os
import pwd
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from supervise import worker_names
from supervise.workers import WORKERS


class ConfigError(Exception):
    """A bad setting; the message is one line naming the setting and what is allowed."""

    # Defined here rather than in supervise.config (which re-exports it) because a
    # validator may raise it directly, and this module sits below the settings table.


class Invalid(ValueError):
    """Raised by validators with the reason only; ``Setting.validate`` adds the setting name."""


@dataclass(frozen=True)
class Check:
    """A validator plus the type name the docs show for it."""

    kind: str
    fn: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        return self.fn(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_int(value: Any) -> int:
    if _is_int(value):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
    raise Invalid(f"{value!r} is not an integer")


def int_check(lo: int = 0, hi: int | None = None) -> Check:
    def check(value: Any) -> int:
        n = _parse_int(value)
        if hi is not None and not lo <= n <= hi:
            raise Invalid(f"must be between {lo} and {hi}, got {n}")
        if n < lo:
            raise Invalid(f"must be at least {lo}, got {n}")
        return n

    return Check("int", check)


def _number(value: Any) -> int | float:
    """Seconds: an int stays an int (Gunicorn configs use ints), floats are allowed too."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
        except ValueError:
            raise Invalid(f"{value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"{value!r} is not a number")
    if not math.isfinite(value) or value < 0:
        raise Invalid(f"must be a number of seconds >= 0, got {value!r}")
    return value


SECONDS = Check("number", _number)

_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise Invalid(f"{value!r} is not a boolean (use true or false)")


BOOL = Check("bool", _bool)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{value!r} is not a string")
    return value.strip()


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    return _str(value) or None


STR = Check("str", _str)
OPT_STR = Check("str or None", _opt_str)


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]  # Gunicorn's "legacy" form: bind = "0.0.0.0:80"
    if not isinstance(value, (list, tuple)):
        raise Invalid(f"{value!r} is not a list of strings")
    return [s for s in (_str(v) for v in value) if s]


STR_LIST = Check("list of str", _str_list)


def _bind_list(value: Any) -> list[str]:
    binds = _str_list(value)
    if not binds:
        raise Invalid("give at least one address (HOST:PORT, unix:PATH or fd://FD)")
    return binds


BIND_LIST = Check("list of str", _bind_list)


def choice_check(*choices: str) -> Check:
    def check(value: Any) -> str:
        text = _str(value).lower()
        if text not in choices:
            raise Invalid(f"{value!r} is not one of {', '.join(choices)}")
        return text

    return Check(" | ".join(choices), check)


def _dict(value: Any) -> dict:
    if not isinstance(value, dict):
        raise Invalid(f"{value!r} is not a dict")
    return dict(value)


DICT = Check("dict", _dict)


def _str_dict(value: Any) -> dict[str, str]:
    d = _dict(value)
    for k, v in d.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise Invalid(f"keys and values must be strings, got {k!r}: {v!r}")
    return d


STR_DICT = Check("dict", _str_dict)


def _addr_list(value: Any) -> list[str]:
    """Comma-separated IPs or networks (``*`` trusts everybody), as in Gunicorn."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise Invalid(f"{value!r} is not a comma-separated list of addresses")
    out = []
    for item in items:
        item = _str(item)
        if not item:
            continue
        if item != "*":
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise Invalid(f"{item!r} is not an IP address, a network or '*'") from None
        out.append(item)
    return out


ADDRESSES = Check("list of str", _addr_list)


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*[.:][A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _worker_class(value: Any) -> str:
    # Gunicorn also accepts the class object itself; keep a dotted path so that
    # supervise.workers.load_worker_class can resolve it after a HUP as well.
    if isinstance(value, type):
        if value.__module__ in ("__config__", "__main__"):
            raise Invalid(
                f"class {value.__qualname__} is defined in the config file: "
                "put it in an importable module and give its dotted path"
            )
        name = f"{value.__module__}:{value.__qualname__}"
    else:
        name = _str(value)
    ours = tuple(WORKERS)
    # Gunicorn's and Uvicorn's classes run as the supervise worker that does the same
    # job; the config loader tells the user (worker_names.py, config_notices.py).
    found = worker_names.foreign(name, ours)
    if isinstance(found, worker_names.Refused):
        raise ConfigError(f"worker class {name!r} ({found.whose}) is not supported: {found.advice}")
    if found is not None and found.to in WORKERS:
        return found.to
    if name in WORKERS or _DOTTED.fullmatch(name):
        return name
    *others, last = WORKERS
    close = worker_names.close_name(name, ours)
    hint = f" (did you mean {close}?)" if close else ""
    # ConfigError, not Invalid: the message names the setting already, so it goes out as is.
    raise ConfigError(
        f"unknown worker class {name!r}{hint}: use {', '.join(others)} or {last}, "
        "or a dotted path to a Worker subclass"
    )


WORKER_CLASS = Check("str", _worker_class)


def _account_id(kind: str, current: Callable[[], int], lookup: Callable[[str], int]) -> Check:
    """A user or group given by name or number; None means the one we run as."""

    def check(value: Any) -> int:
        if value is None:
            return current()
        if _is_int(value):
            return value
        name = _str(value)
        if name.isdigit():
            return int(name)
        try:
            return lookup(name)
        except KeyError:
            raise Invalid(f"no such {kind} {name!r}") from None

    return Check("int", check)


USER = _account_id("user", os.geteuid, lambda name: pwd.getpwnam(name).pw_uid)
GROUP = _account_id("group", os.getegid, lambda name: grp.getgrnam(name).gr_gid)


def _umask(value: Any) -> int:
    """Octal as people write it: 0o22, 022 and 0x12 all work; plain digits are decimal."""
    if _is_int(value):
        mask = value
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            # int(x, 0) refuses "022", which is how umasks are usually written.
            mask = int(text, 8) if re.fullmatch(r"0\d+", text) else int(text, 0)
        except ValueError:
            raise Invalid(f"{value!r} is not a umask (e.g. 0o22 or 022)") from None
    else:
        raise Invalid(f"{value!r} is not a umask (e.g. 0o22 or 022)")
    if not 0 <= mask <= 0o777:
        raise Invalid(f"must be between 0 and 0o777, got {oct(mask)}")
    return mask


UMASK = Check("int", _umask)


def _cpu_affinity(value: Any) -> str | list[int]:
    from supervise.affinity import parse

    try:
        return parse(value)
    except ValueError as exc:
        raise Invalid(str(exc)) from None


CPU_AFFINITY = Check("off | auto | list of cores", _cpu_affinity)


def _raw_env(value: Any) -> list[str]:
    items = _str_list(value)
    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise Invalid(f"{item!r} is not in KEY=VALUE form")
    return items


RAW_ENV = Check("list of str", _raw_env)


def _chdir(value: Any) -> str:
    path = os.path.abspath(os.path.expanduser(_str(value)))
    if not os.path.isdir(path):
        raise Invalid(f"{value!r} is not a directory")
    return path


DIRECTORY = Check("str", _chdir)


def _existing_file(value: Any) -> str | None:
    path = _opt_str(value)
    if path is not None and not os.path.isfile(path):
        raise Invalid(f"no such file {path!r}")
    return path


EXISTING_FILE = Check("str or None", _existing_file)


_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _cert_reqs(value: Any) -> int:
    if isinstance(value, str):
        text = value.strip().lower().removeprefix("cert_")
        if text in _CERT_REQS:
            return int(_CERT_REQS[text])
    try:
        n = _parse_int(value)
    except Invalid:
        n = -1
    if n not in (0, 1, 2):
        raise Invalid(f"{value!r} is not 0 (none), 1 (optional) or 2 (required)")
    return n


CERT_REQS = Check("int", _cert_reqs)


def _root_path(value: Any) -> str:
    path = _opt_str(value) or ""
    if path and not path.startswith("/"):
        raise Invalid(f"{value!r} must start with '/'")
    return path.rstrip("/")


ROOT_PATH = Check("str", _root_path)


def _sendfile(value: Any) -> bool:
    # Gunicorn configs may say sendfile = None, meaning "the default" (enabled).
    return True if value is None else _bool(value)


SENDFILE = Check("bool", _sendfile)


def _positional_arity_ok(fn: Callable, arity: int) -> bool | None:
    """Can fn be called with exactly ``arity`` positional arguments? None: cannot tell."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*range(arity))
    except TypeError:
        return False
    return True


def _import_callable(path: str) -> Callable:
    module_name, sep, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
    if not sep or not module_name:
        raise Invalid(f"{path!r} is not a dotted path like 'package.module.function'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        raise Invalid(f"cannot import {path!r}: {exc}") from None
    except AttributeError:
        raise Invalid(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def hook_check(arity: int, params: str, accept_fewer: bool = False) -> Check:
    """A server hook: a callable (or its dotted path) taking ``arity`` positional args.

    ``accept_fewer`` exists for post_request, which Gunicorn also accepts with
    2 or 3 parameters; such a hook is wrapped so callers always pass 4.
    """

    def check(value: Any) -> Callable:
        fn = _import_callable(value) if isinstance(value, str) else value
        if not callable(fn):
            raise Invalid(f"{value!r} is not callable")
        ok = _positional_arity_ok(fn, arity)
        if ok is not False:
            return fn
        if accept_fewer:
            for n in range(arity - 1, 1, -1):
                if _positional_arity_ok(fn, n):
                    return _truncate_args(fn, n)
        raise Invalid(f"the hook must accept {arity} positional argument(s): {params}")

    return Check(f"callable({params})", check)


def _truncate_args(fn: Callable, n: int) -> Callable:
    def hook(*args: Any) -> Any:
        return fn(*args[:n])

    hook.__wrapped__ = fn  # type: ignore[attr-defined]
    hook.__qualname__ = getattr(fn, "__qualname__", "hook")
    hook.__module__ = getattr(fn, "__module__", __name__)
    return hook
