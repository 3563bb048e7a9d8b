"""The Server Mechanics settings: how the process runs and what the app sees of
the server (preloading, sendfile, the working directory, daemon mode, the user
and group, umask, forwarded headers and the PROXY protocol, root path, the
Server and Date headers).

Apart from settings.py only to keep that table readable; settings.py names the
section and includes them in its place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from supervise import settings_proxy
from supervise.validators import (
    ADDRESSES,
    BOOL,
    DIRECTORY,
    GROUP,
    OPT_STR,
    RAW_ENV,
    ROOT_PATH,
    SENDFILE,
    STR_DICT,
    UMASK,
    USER,
)


def _default_sendfile(environ: Mapping[str, str]) -> bool:
    value = environ.get("SENDFILE")
    return True if value is None else value.strip().lower() in ("y", "1", "yes", "true")


def declare(add: Callable[..., None]) -> None:
    """The settings of this module, in the Server Mechanics section."""
    add(
        name="preload_app",
        flags=["--preload"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Import the application in the master before forking the workers: workers "
        "start faster and share memory copy-on-write. The master's imports cannot be "
        "reloaded, so SIGHUP then reloads the configuration only; deploy new code with "
        "SIGUSR2. With -k gevent, patch in the config file before the app is imported "
        "(`from gevent import monkey; monkey.patch_all()` at its top): the worker can only "
        "patch after fork, too late for modules the master already imported.",
    )
    add(
        name="sendfile",
        flags=["--no-sendfile"],
        action="store_false",
        validator=SENDFILE,
        default_factory=_default_sendfile,
        env="SENDFILE",
        default_doc="`True`, or the SENDFILE environment variable (`1`, `yes`, `true` "
        "enable it) when set",
        help="Send files with sendfile(); --no-sendfile turns it off. This applies to files "
        "the application returns through `wsgi.file_wrapper`; turn it off on file systems "
        "where sendfile is broken.",
    )
    add(
        name="chdir",
        flags=["--chdir"],
        metavar="DIR",
        validator=DIRECTORY,
        default_factory=lambda environ: os.getcwd(),
        default_doc="the current directory",
        help="Change to this directory before loading the application; it is also put "
        "first on sys.path so that the application's modules import.",
    )
    add(
        name="daemon",
        flags=["-D", "--daemon"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Detach from the terminal and run in the background. Under systemd, "
        "supervisord or a container, leave it off.",
    )
    add(
        name="raw_env",
        flags=["-e", "--env"],
        metavar="KEY=VALUE",
        action="append",
        validator=RAW_ENV,
        default=[],
        help="Set an environment variable for the application, as `KEY=VALUE`; repeat the "
        'option for several. In a config file: `raw_env = ["KEY=VALUE"]`.',
    )
    add(
        name="pidfile",
        flags=["-p", "--pid"],
        metavar="FILE",
        validator=OPT_STR,
        help="Write the master's process id to this file. During a SIGUSR2 upgrade the old "
        "master's file is renamed to `FILE.oldbin`.",
    )
    add(
        name="worker_tmp_dir",
        flags=["--worker-tmp-dir"],
        metavar="DIR",
        validator=OPT_STR,
        help="Ignored; accepted for compatibility with Gunicorn. Gunicorn keeps worker "
        "heartbeats in temporary files, supervise keeps them in shared memory, so no "
        "directory is needed.",
    )
    add(
        name="user",
        flags=["-u", "--user"],
        metavar="USER",
        validator=USER,
        default_factory=lambda environ: os.geteuid(),
        default_doc="the current user",
        help="Run the workers as this user, given by name or numeric id (the master must "
        "start as root to switch).",
    )
    add(
        name="group",
        flags=["-g", "--group"],
        metavar="GROUP",
        validator=GROUP,
        default_factory=lambda environ: os.getegid(),
        default_doc="the current group",
        help="Run the workers as this group, given by name or numeric id.",
    )
    add(
        name="umask",
        flags=["-m", "--umask"],
        metavar="INT",
        validator=UMASK,
        default=0,
        help="The mask for the unix sockets the server binds, as Gunicorn applies it: the "
        "default 0 lets any user who can reach the socket's folder connect (nginx running "
        "as another user); `007` limits it to the owner and group. The processes (master, "
        "workers, the app, log and pid files) run with the umask they inherited plus 022, "
        "whatever this is: nothing they create is writable by group or others. Octal is "
        "written `0o22` or `022`; a number without a leading 0 is decimal.",
    )
    add(
        name="initgroups",
        flags=["--initgroups"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="When switching to `user`, also give the workers all of that user's "
        "supplementary groups.",
    )
    add(
        name="forwarded_allow_ips",
        flags=["--forwarded-allow-ips"],
        metavar="ADDRESSES",
        validator=ADDRESSES,
        default_factory=lambda environ: environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1"),
        env="FORWARDED_ALLOW_IPS",
        default_doc="`'127.0.0.1,::1'`, or the FORWARDED_ALLOW_IPS environment variable when set",
        help="The proxies trusted with X-Forwarded-* and Forwarded headers. A "
        "comma-separated list of addresses or networks: only from those peers do the "
        "headers set the client address and the scheme; from anyone else they are "
        "ignored. `*` trusts every peer: use it only when nothing "
        "but your proxy can reach the server.",
    )
    add(
        name="proxy_headers",
        flags=["--proxy-headers"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Believe X-Forwarded-For, X-Forwarded-Proto (and the other "
        "secure_scheme_headers) and RFC 7239 Forwarded from the peers in "
        "forwarded_allow_ips (Uvicorn's flag, on by default as there). "
        "--no-proxy-headers ignores them from every peer, whatever forwarded_allow_ips "
        "says. The Host header is passed to the app as the client sent it: a framework "
        "that should trust X-Forwarded-Host says so itself (Django's "
        "USE_X_FORWARDED_HOST, Werkzeug's ProxyFix).",
    )
    add(
        name="secure_scheme_headers",
        validator=STR_DICT,
        default={
            "X-FORWARDED-PROTOCOL": "ssl",
            "X-FORWARDED-PROTO": "https",
            "X-FORWARDED-SSL": "on",
        },
        help="Headers by which a trusted proxy says the client used HTTPS. When a peer in "
        "forwarded_allow_ips sends one of these headers with exactly the given value, the "
        "application sees the `https` scheme. Header names are case-insensitive, values "
        "are compared exactly. Make sure the proxy removes these headers when a client sends them.",
    )
    settings_proxy.declare(add)
    add(
        name="pythonpath",
        flags=["--pythonpath"],
        metavar="DIRS",
        validator=OPT_STR,
        help="Comma-separated directories to put on sys.path before loading the "
        "application, for example `/srv/app,/srv/lib`.",
    )
    add(
        name="root_path",
        flags=["--root-path"],
        metavar="PATH",
        validator=ROOT_PATH,
        default_factory=lambda environ: environ.get("SCRIPT_NAME", ""),
        env="SCRIPT_NAME",
        default_doc="`''`, or the SCRIPT_NAME environment variable when set",
        help="The URL prefix the application is mounted under, such as `/api`. "
        "It becomes SCRIPT_NAME (ASGI `root_path`) and is removed from the start "
        "of PATH_INFO.",
    )
    add(
        name="server_header",
        flags=["--server-header"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Send `Server: supervise` on responses that do not set a Server header. "
        "--no-server-header leaves it out, so that the software is not advertised.",
    )
    add(
        name="date_header",
        native=True,
        flags=["--date-header"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Send a Date header on responses that do not set one (RFC 9110 asks an origin "
        "server with a clock to). --no-date-header leaves it out, for a proxy in front "
        "that adds its own.",
    )
    add(
        name="enable_stdio_inheritance",
        flags=["-R", "--enable-stdio-inheritance"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="With --daemon, keep stdout and stderr open instead of redirecting them to "
        "/dev/null. Set PYTHONUNBUFFERED=1 to see output immediately.",
    )
