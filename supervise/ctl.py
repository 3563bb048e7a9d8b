"""``supervise ctl``: talk to a running master over its control socket.

    supervise ctl [-s PATH | -c CONFIG] [--json] COMMAND [ARGS] [--json ...]

Commands: ``status``, ``reload``, ``scale N|+N|-N``, ``retire PID``,
``reopen-logs``, ``stop [--graceful]``. The socket is ``-s PATH``, else
``$SUPERVISE_CONTROL_SOCKET``, else ``control_socket`` from the configuration
(``-c FILE``, ``./supervise.conf.py``, ``SUPERVISE_CMD_ARGS``), as the server
itself would read it. Every failure is one line on stderr and exit status 1
(2 for a usage error).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any, NoReturn

SOCKET_ENV = "SUPERVISE_CONTROL_SOCKET"
DEFAULT_TIMEOUT = 10.0
# A reload waits for a whole generation to boot; a graceful stop for the
# requests in flight (graceful_timeout).
LONG_TIMEOUT = 300.0


class CtlError(Exception):
    """What went wrong, in one line for the user."""


def _global_options(parser: argparse.ArgumentParser, *, after_command: bool) -> None:
    """-s, -c, --json and --timeout, accepted before the command or after it.

    After the command the defaults are SUPPRESS: argparse copies a
    subparser's defaults over the main namespace, so a plain default there
    would undo ``supervise ctl --json status``.
    """
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if after_command else {}
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-s", "--socket", metavar="PATH", help="the master's control socket", **unset
    )
    where.add_argument(
        "-c",
        "--config",
        metavar="CONFIG",
        help="read control_socket from this config file",
        **unset,
    )
    parser.add_argument(
        "--json", action="store_true", help="print the master's answer as JSON", **unset
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help=f"give up waiting after this long (default {DEFAULT_TIMEOUT:g}; "
        f"reload and stop --graceful: {LONG_TIMEOUT:g})",
        **unset,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="supervise ctl",
        description="Control a running supervise master through its control socket. "
        "The options -s, -c, --json and --timeout go before or after the command.",
    )
    _global_options(parser, after_command=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary)
        _global_options(sub, after_command=True)
        return sub

    command("status", "the master and every worker")
    command("reload", "as HUP; answers once the new generation serves or failed")
    scale = command("scale", "set the number of workers: N, +N or -N")
    scale.add_argument("count", metavar="N|+N|-N")
    retire = command("retire", "replace one worker gracefully")
    retire.add_argument("pid", type=int, metavar="PID")
    command("reopen-logs", "as USR1: reopen the log files")
    stop = command("stop", "stop the server now (as INT)")
    stop.add_argument(
        "--graceful", action="store_true", help="finish the requests in flight first (as TERM)"
    )
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, options before or after the command alike."""
    parser = _parser()
    # The main parser sees no -s/-c given after the command, so the
    # mutually exclusive group cannot catch `-s A status -c B` by itself.
    args = parser.parse_args(argv)
    if args.socket and args.config:
        parser.error("argument -c/--config: not allowed with argument -s/--socket")
    return args


def find_socket(args: argparse.Namespace) -> str:
    if args.socket:
        return str(args.socket)
    if os.environ.get(SOCKET_ENV) and not args.config:
        return os.environ[SOCKET_ENV]
    from supervise.cli import load_config
    from supervise.config import ConfigError

    try:
        cfg = load_config(["-c", args.config] if args.config else [], os.environ)
    except ConfigError as exc:
        raise CtlError(str(exc)) from None
    if not cfg.control_socket:
        where = f"config file {cfg.config}" if cfg.config else "the configuration"
        raise CtlError(
            f"no control socket: {where} sets no control_socket; "
            "give -s PATH (the master's --control-socket)"
        )
    return str(cfg.control_socket)


def request(path: str, command: dict[str, Any], timeout: float) -> tuple[dict[str, Any], Any]:
    """Send one command; return the answer and the still-open socket."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except FileNotFoundError:
        sock.close()
        raise CtlError(
            f"no master at {path}: the socket does not exist "
            "(is supervise running with --control-socket there?)"
        ) from None
    except PermissionError:
        sock.close()
        raise CtlError(
            f"permission denied: {path} is owner-only (run as the master's user or root)"
        ) from None
    except ConnectionRefusedError:
        sock.close()
        raise CtlError(
            f"stale control socket {path}: no master is listening (it exited without removing it)"
        ) from None
    except OSError as exc:
        sock.close()
        raise CtlError(f"cannot connect to {path}: {exc.strerror or exc}") from None
    try:
        sock.sendall(json.dumps(command).encode() + b"\n")
        line = _read_line(sock, timeout, path)
    except BaseException:
        sock.close()
        raise
    try:
        answer = json.loads(line)
    except ValueError:
        sock.close()
        raise CtlError(f"the master at {path} sent a malformed answer") from None
    return answer, sock


def _read_line(sock: socket.socket, timeout: float, path: str) -> bytes:
    data = b""
    while b"\n" not in data:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise CtlError(f"the master at {path} did not answer within {timeout:g}s") from None
        except OSError as exc:
            raise CtlError(f"connection to {path} failed: {exc.strerror or exc}") from None
        if not chunk:
            raise CtlError(
                f"the master at {path} closed the connection without answering (stopping?)"
            )
        data += chunk
    return data.partition(b"\n")[0]


def _wait_gone(sock: socket.socket, timeout: float) -> bool:
    """After ``stop``: the master keeps the connection until it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if not sock.recv(4096):
                return True
        except TimeoutError:
            return False
        except OSError:
            return True
    return False


# -- output ----------------------------------------------------------------------------
def duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def size(count: int | None) -> str:
    if count is None:
        return "-"
    return f"{count / (1024 * 1024):.1f} MiB"


def format_status(answer: dict[str, Any]) -> str:
    m = answer["master"]
    serving = m["serving_generation"]
    if m["reloading"]:
        gen = f"generation {m['generation']} booting, {serving} serving"
    else:
        gen = f"generation {serving or m['generation']}{' serving' if serving else ' booting'}"
    lines = [
        f"master  pid {m['pid']}, supervise {m['version']}, up {duration(m['uptime'])}, "
        f"{gen}, {m['target_workers']} worker(s) wanted",
        f"app     {m['app']} (-k {m['worker_class']})",
        f"binds   {', '.join(m['binds']) or '-'}",
        *([f"quic    {', '.join(m['quic_binds'])} (HTTP/3, udp)"] if m.get("quic_binds") else []),
        f"config  {m['config'] or '-'}",
    ]
    if m.get("new_master"):
        lines.append(f"usr2    new master running: pid {m['new_master']}")
    if m.get("parent_master"):
        lines.append(f"usr2    started by master pid {m['parent_master']}, still running")
    header = ("PID", "GEN", "STATE", "REQUESTS", "IN FLIGHT", "CONNS", "RSS", "AGE", "HEARTBEAT")
    rows = [header]
    for w in answer["workers"]:
        rows.append(
            (
                str(w["pid"]),
                str(w["generation"]),
                w["state"],
                str(w["requests"]),
                str(w["in_flight"]),
                str(w["connections"]),
                size(w["rss"]),
                duration(w["age"]),
                f"{duration(w['heartbeat_age'])} ago",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    left = {2}  # the state reads better left-aligned
    lines.append("")
    for row in rows:
        cells = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    if len(rows) == 1:
        lines.append("(no workers)")
    return "\n".join(lines)


def _fail(message: str, status: int = 1) -> NoReturn:
    sys.stderr.write(f"supervise ctl: {' '.join(message.split())}\n")
    sys.exit(status)


def main(argv: list[str]) -> None:
    """``supervise ctl ARGS`` (argv without "ctl")."""
    args = parse(argv)
    command: dict[str, Any] = {"command": args.command, "args": []}
    if args.command == "scale":
        command["args"] = [args.count]
    elif args.command == "retire":
        command["args"] = [str(args.pid)]
    elif args.command == "stop" and args.graceful:
        command["args"] = ["--graceful"]
    waits = args.command == "reload" or (args.command == "stop" and args.graceful)
    timeout = args.timeout or (LONG_TIMEOUT if waits else DEFAULT_TIMEOUT)
    try:
        path = find_socket(args)
        answer, sock = request(path, command, timeout)
    except CtlError as exc:
        _fail(str(exc))
    try:
        if args.json:
            sys.stdout.write(json.dumps(answer, indent=2) + "\n")
        if not answer.get("ok"):
            _fail(str(answer.get("error") or "the master refused the command"))
        if not args.json:
            text = format_status(answer) if args.command == "status" else answer.get("message", "")
            sys.stdout.write(f"{text}\n")
        if args.command == "stop":
            sys.stdout.flush()
            limit = timeout if waits else max(timeout, 60.0)
            if not _wait_gone(sock, limit):
                _fail(f"the master at {path} has not exited after {limit:g}s")
            if not args.json:
                sys.stdout.write("stopped\n")
    finally:
        sock.close()
