"""The command line: argv + SUPERVISE_CMD_ARGS + GUNICORN_CMD_ARGS + config file -> Config,
and ``main()``.

Precedence, highest first: the command line, SUPERVISE_CMD_ARGS,
GUNICORN_CMD_ARGS, the config file, the defaults (some of which come from the
environment: PORT, WEB_CONCURRENCY, ...). The config file is ``-c FILE``, else
./supervise.conf.py, else Gunicorn's ./gunicorn.conf.py. ``load_config`` has no
side effect beyond executing the config file, because the arbiter calls it again
on SIGHUP to reload: what it has to say goes on ``Config.notices``.
"""

from __future__ import annotations

import argparse
import builtins
import importlib
import importlib.util
import os
import shlex
import sys
import traceback
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NoReturn

from supervise import __version__
from supervise.config import NOT_FROM_FILE, SECTIONS, SETTINGS, Config, ConfigError, Setting
from supervise.config_notices import (
    GunicornFlags,
    Notice,
    NoticeKind,
    close_option,
    file_notices,
    split_gunicorn_only,
    unique,
    worker_class_notice,
)

CMD_ARGS_ENV = "SUPERVISE_CMD_ARGS"
GUNICORN_CMD_ARGS_ENV = "GUNICORN_CMD_ARGS"
DEFAULT_CONFIG_FILE = "supervise.conf.py"
GUNICORN_CONFIG_FILE = "gunicorn.conf.py"

USAGE = "%(prog)s [OPTIONS] [APP_MODULE]"
DESCRIPTION = (
    "Run a Python web application (WSGI, ASGI or RSGI) with a pre-fork master and workers. "
    "APP_MODULE is MODULE:ATTRIBUTE, e.g. myproject.wsgi:application."
)


def _epilog() -> str:
    config_only = [s.name for s in SETTINGS.values() if not s.flags and s.arity is None]
    return (
        f"Options can also be given in a config file (-c FILE, default ./{DEFAULT_CONFIG_FILE}, "
        f"else ./{GUNICORN_CONFIG_FILE}) and in the {CMD_ARGS_ENV} and {GUNICORN_CMD_ARGS_ENV} "
        f"environment variables; the command line wins, then {CMD_ARGS_ENV}, then "
        f"{GUNICORN_CMD_ARGS_ENV}, then the file. "
        "supervise --help-setting NAME describes one setting in full (NAME: a config-file "
        "name such as max_requests, or an option such as --max-requests). "
        f"Config-file only: {', '.join(config_only)} and the server hooks (on_starting, "
        "post_fork, ...). "
        "To control a running server: supervise ctl --help."
    )


class _Parser(argparse.ArgumentParser):
    """argparse that raises ConfigError instead of printing usage and exiting, so that the
    caller reports every configuration problem the same way (one line, exit 2) and a
    reload on SIGHUP never exits the master."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)

    def option_strings(self) -> list[str]:
        """Every option this parser takes (``--no-X`` forms included), for "did you mean"."""
        return list(self._option_string_actions)


class _HelpSetting(argparse.Action):
    """--help-setting NAME: the full text of one setting, which an installed package
    has no docs/settings.md to look it up in."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from supervise.help_setting import describe

        sys.stdout.write(describe(str(values)))
        parser.exit(0)


def _help_text(setting: Setting) -> str:
    text = setting.short_help.replace("`", "")
    if setting.action in ("store", "append"):
        if setting.default_doc is not None:
            default = setting.default_doc.replace("`", "")
        else:
            default = repr(setting.default)
        text = f"{text} [default: {default}]"
    return text.replace("%", "%%")  # argparse %-formats help strings


def build_parser() -> _Parser:
    """The parser for every setting that has flags, grouped by section for --help.

    Every default is SUPPRESS so that the namespace holds only what was actually
    given; that is what lets the command line override the config file without
    clobbering it with defaults.
    """
    parser = _Parser(
        prog="supervise",
        usage=USAGE,
        description=DESCRIPTION,
        epilog=_epilog(),
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"supervise {__version__} (Python {sys.version.split()[0]})",
    )
    parser.add_argument(
        "-v",
        action="version",
        version=f"supervise (version {__version__})",
        help="show the version as Gunicorn's -v does, and exit",
    )
    parser.add_argument(
        "--help-setting",
        action=_HelpSetting,
        metavar="NAME",
        help="describe one setting in full (flags, config-file name, default, text) and exit",
    )
    parser.add_argument(
        "app",
        nargs="?",
        metavar="APP_MODULE",
        help="the application, as MODULE:ATTRIBUTE (sets wsgi_app)",
    )
    for section in SECTIONS:
        group = parser.add_argument_group(section)
        for setting in SETTINGS.values():
            if setting.section != section or not setting.flags:
                continue
            kwargs: dict[str, Any] = {"dest": setting.name, "help": _help_text(setting)}
            if setting.action == "toggle":
                kwargs["action"] = argparse.BooleanOptionalAction
            else:
                kwargs["action"] = setting.action
            if setting.action in ("store", "append"):
                kwargs["metavar"] = setting.metavar
                if setting.nargs is not None:
                    kwargs["nargs"] = setting.nargs
            group.add_argument(*setting.flags, **kwargs)
    return parser


def _unrecognized(extras: list[str], options: list[str]) -> str:
    """argparse's complaint about leftovers, with "did you mean" for a mistyped option."""
    hint = ""
    for extra in extras:
        if extra.startswith("-") and len(extra) > 1:
            option = extra.partition("=")[0]
            meant = close_option(option, options)
            hint = f" (did you mean {meant}?)" if meant else ""
            break
    return f"unrecognized arguments: {' '.join(extras)}{hint}"


def _parse(
    parser: _Parser, args: list[str], source: str, *, gunicorn_flags: GunicornFlags
) -> tuple[dict[str, Any], list[Notice]]:
    options = parser.option_strings()
    args, notices = split_gunicorn_only(
        args, our_flags=options, policy=gunicorn_flags, where=source
    )
    try:
        ns, extras = parser.parse_known_args(args)
        if extras:
            raise ConfigError(_unrecognized(extras, options))
    except ConfigError as exc:
        raise ConfigError(f"{exc}{source} (see supervise --help)") from None
    values = vars(ns)
    if "app" in values:
        values["wsgi_app"] = values.pop("app")
    return values, notices


def _parse_env(
    parser: _Parser, environ: Mapping[str, str], var: str
) -> tuple[dict[str, Any], list[Notice]]:
    """Options from an environment variable, parsed like a command line. Gunicorn's
    options for settings supervise lacks are skipped with a warning: the variable is
    often set by a platform or shared with a Gunicorn deployment."""
    try:
        args = shlex.split(environ.get(var, ""))
    except ValueError as exc:
        raise ConfigError(f"cannot parse {var}: {exc}") from None
    return _parse(parser, args, f" (in {var})", gunicorn_flags=GunicornFlags.SKIP)


def _apply(cfg: Config, values: Mapping[str, Any], source: str, notices: list[Notice]) -> None:
    for name, value in values.items():
        if name in SETTINGS and name not in NOT_FROM_FILE:
            try:
                cfg.set(name, value)
            except ConfigError as exc:
                raise ConfigError(f"{exc}{source}") from None
            if name == "worker_class":
                notice = worker_class_notice(value, where=source)
                if notice is not None:
                    notices.append(notice)


def _default_config_file(notices: list[Notice]) -> str | None:
    """./supervise.conf.py, else Gunicorn's ./gunicorn.conf.py, so that a Gunicorn
    deployment's file is honoured (and the log says which one was read)."""
    if os.path.isfile(DEFAULT_CONFIG_FILE):
        return DEFAULT_CONFIG_FILE
    if os.path.isfile(GUNICORN_CONFIG_FILE):
        notices.append(
            Notice(
                NoticeKind.SOURCE,
                f"Reading Gunicorn's config file ./{GUNICORN_CONFIG_FILE} "
                f"(there is no ./{DEFAULT_CONFIG_FILE})",
            )
        )
        return GUNICORN_CONFIG_FILE
    return None


def _raise_line(exc: BaseException, filename: str | None) -> str:
    """' (line N)' for where the config file raised, else for the innermost frame."""
    tb: TracebackType | None = exc.__traceback__
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if filename is None or frame.f_code.co_filename == filename:
            line = lineno
    return f" (line {line})" if line is not None else ""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_config_file(location: str) -> tuple[str, dict[str, Any]]:
    """Execute a config file (or import a ``python:module``) and return its names.

    Returns the location as it should be remembered (an absolute path, so that a
    reload after a chdir still finds it) and the module namespace.
    """
    if location.startswith("python:"):
        module_name = location[len("python:") :]
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError) as exc:
            raise ConfigError(f"cannot import config module {module_name!r}: {exc}") from None
        if spec is None:
            raise ConfigError(f"config module {module_name!r} not found")
        try:
            if module_name in sys.modules:  # a reload (SIGHUP) must see the edits
                module = importlib.reload(sys.modules[module_name])
            else:
                module = importlib.import_module(module_name)
        except (Exception, SystemExit) as exc:
            where = _raise_line(exc, spec.origin)
            raise ConfigError(
                f"config module {module_name!r} raised {_one_line(exc)}{where}"
            ) from None
        return location, dict(vars(module))

    path = os.path.abspath(os.path.expanduser(location.removeprefix("file:")))
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read config file {location!r}: {reason}") from None
    try:
        code = compile(source, path, "exec")
    except SyntaxError as exc:
        raise ConfigError(
            f"config file {location!r} has a syntax error on line {exc.lineno}: {exc.msg}"
        ) from None
    except ValueError as exc:  # e.g. NUL bytes
        raise ConfigError(f"config file {location!r} is not Python source: {exc}") from None
    namespace: dict[str, Any] = {
        "__builtins__": builtins,
        "__name__": "__config__",
        "__file__": path,
        "__doc__": None,
        "__package__": None,
    }
    try:
        exec(code, namespace)
    except (Exception, SystemExit) as exc:
        where = _raise_line(exc, path)
        raise ConfigError(f"config file {location!r} raised {_one_line(exc)}{where}") from None
    return path, namespace


def load_config(argv: list[str], environ: Mapping[str, str]) -> Config:
    """Resolve the settings from argv (without the program name), SUPERVISE_CMD_ARGS,
    GUNICORN_CMD_ARGS, the config file and the defaults. Raises ConfigError; --help,
    --help-setting and --version print and raise SystemExit(0), as argparse does.
    Warnings (ignored names, Gunicorn-only settings) land on ``cfg.notices``."""
    parser = build_parser()
    from_cli, notices = _parse(parser, list(argv), "", gunicorn_flags=GunicornFlags.REFUSE)
    from_env, env_notices = _parse_env(parser, environ, CMD_ARGS_ENV)
    from_gunicorn, gunicorn_notices = _parse_env(parser, environ, GUNICORN_CMD_ARGS_ENV)
    notices += env_notices + gunicorn_notices

    cfg = Config(environ)
    location = from_cli.get("config") or from_env.get("config") or from_gunicorn.get("config")
    if location is None:
        location = _default_config_file(notices)
    if location:
        resolved, namespace = read_config_file(location)
        where = f" (in config file {location})"
        notices += file_notices(namespace, where=where)
        _apply(cfg, namespace, where, notices)
        cfg.set("config", resolved)
    _apply(cfg, from_gunicorn, f" (in {GUNICORN_CMD_ARGS_ENV})", notices)
    _apply(cfg, from_env, f" (in {CMD_ARGS_ENV})", notices)
    _apply(cfg, from_cli, "", notices)
    cfg.notices = unique(notices)
    return cfg


def check_tls_files(cfg: Config) -> None:
    """Refuse, as any bad setting, a certificate without its key or with
    another's: found here, before a worker boots, it is one clear line instead
    of OpenSSL's "PEM lib" in a worker's log. A custom ssl_context hook may
    load its key from elsewhere, so it is trusted to know better."""
    from supervise.hooks import HOOKS
    from supervise.tls import key_pair_problem

    if not cfg.certfile or cfg.ssl_context is not HOOKS["ssl_context"].default:
        return
    problem = key_pair_problem(cfg.certfile, cfg.keyfile, cfg.keyfile_password)
    if problem:
        raise ConfigError(problem)


def load_server_config(argv: list[str], environ: Mapping[str, str]) -> Config:
    """load_config() plus the checks that only serving needs (not ctl, not
    --print-config): at start and at each HUP alike, so that a reload to a
    mismatched key is refused and the old configuration keeps serving."""
    cfg = load_config(argv, environ)
    check_tls_files(cfg)
    check_static_folders(cfg)
    check_quic(cfg)
    return cfg


def check_quic(cfg: Config) -> None:
    """HTTP/3 is the native server's, and QUIC has no clear-text form."""
    if not cfg.quic_bind:
        return
    if cfg.worker_class_str not in ("rsgi", "native"):
        raise ConfigError(
            f"quic_bind: HTTP/3 is served by -k rsgi and -k native, not by "
            f"-k {cfg.worker_class_str}"
        )
    if not cfg.certfile:
        raise ConfigError("quic_bind: HTTP/3 needs TLS: set certfile (and keyfile)")


def check_static_folders(cfg: Config) -> None:
    """A --static-map folder that cannot be served is refused at start (and
    at HUP), not found by the first request."""
    if not cfg.static_map:
        return
    from supervise.static_files import static_files

    base = os.path.abspath(cfg.chdir) if cfg.chdir else None
    try:
        static_files(cfg, base)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


# Settings --print-config must not show (it often lands in logs and tickets).
SECRET = frozenset({"keyfile_password"})


def format_settings(cfg: Config) -> str:
    """``--print-config``: ``name = value``, sorted; values as Python literals where possible."""
    lines = []
    for name, value in cfg.items():
        if callable(value):
            target = getattr(value, "__wrapped__", value)
            module = getattr(target, "__module__", None) or "?"
            qualname = getattr(target, "__qualname__", None) or type(target).__name__
            shown = f"<{module}.{qualname}>"
        elif name in SECRET and value is not None:
            shown = "'********'"
        else:
            shown = repr(value)
        lines.append(f"{name} = {shown}")
    return "\n".join(lines) + "\n"


def _fail(message: str, status: int) -> NoReturn:
    sys.stderr.write(f"Error: {' '.join(message.split())}\n")
    sys.exit(status)


def print_notices(notices: tuple[Notice, ...]) -> None:
    """What load_config noticed, on stderr, for the commands that exit before logging."""
    for notice in notices:
        label = "Warning" if notice.is_warning else "Note"
        sys.stderr.write(f"{label}: {notice.text}\n")


def check_app(cfg: Config) -> int:
    """--check-config: import the app and make sure the worker class can serve it.

    0 when it loads; 1 when it cannot be loaded; 2 when it loads but a config-file
    name looks like a misspelt setting (it would be ignored: the server would run,
    just not as configured). Other notices are warnings and leave the status alone.
    """
    from supervise.loading import AppLoadError, load_app
    from supervise.workers import WorkerClassError, load_worker_class

    try:
        worker_class = load_worker_class(cfg.worker_class_str)
        app = load_app(cfg)
        worker_class.interface_for(app, cfg)
    except (AppLoadError, WorkerClassError) as exc:
        sys.stderr.write(f"Error: {exc}\n")
        details = getattr(exc, "details", "")
        if details:
            sys.stderr.write(details.rstrip() + "\n")
        return 1
    except Exception:
        sys.stderr.write("Error: loading the application failed:\n")
        traceback.print_exc()
        return 1
    misspelt = [n for n in cfg.notices if n.kind is NoticeKind.MISSPELT]
    if misspelt:
        sys.stderr.write(
            f"Error: {len(misspelt)} name(s) in the configuration look like misspelt settings "
            "(see above); they would be ignored\n"
        )
        return 2
    warnings = sum(n.is_warning for n in cfg.notices)
    more = f" ({warnings} warning(s) above)" if warnings else ""
    sys.stdout.write(
        f"Configuration OK: {cfg.app_uri!r} loads and suits worker class "
        f"{cfg.worker_class_str!r}{more}\n"
    )
    return 0


def main(argv: list[str] | None = None) -> None:
    """The ``supervise`` command (also ``python -m supervise``)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["ctl"]:  # an app module named ctl is written ctl:app
        from supervise import ctl

        ctl.main(args[1:])
        return
    try:
        if "--help-setting" in args[:-1]:
            # Read here, not by argparse, which takes "--help-setting -b" for two options.
            from supervise.help_setting import describe

            sys.stdout.write(describe(args[args.index("--help-setting") + 1]))
            sys.exit(0)
        cfg = load_config(args, os.environ)
    except ConfigError as exc:
        _fail(str(exc), 2)

    if cfg.print_config or cfg.check_config:
        print_notices(cfg.notices)
    if cfg.print_config:
        sys.stdout.write(format_settings(cfg))
        sys.stdout.flush()
        if not cfg.check_config:
            sys.exit(0)
    if not cfg.app_uri:
        _fail(
            "no application given: supervise [OPTIONS] MODULE:ATTRIBUTE "
            "(or wsgi_app in the config file)",
            2,
        )
    try:
        check_tls_files(cfg)
        check_static_folders(cfg)
        check_quic(cfg)
    except ConfigError as exc:
        _fail(str(exc), 2)
    if cfg.check_config:
        sys.exit(check_app(cfg))

    from supervise.arbiter import Arbiter
    from supervise.workers import WorkerClassError

    try:
        Arbiter(cfg, argv=args, reload_config=lambda: load_server_config(args, os.environ)).run()
    except ConfigError as exc:  # e.g. a log file that cannot be opened at startup
        _fail(str(exc), 2)
    except WorkerClassError as exc:  # -k names a class that cannot be imported
        _fail(str(exc), 2)
