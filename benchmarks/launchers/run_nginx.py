"""nginx serving a folder on a URL prefix: nginx takes its settings from a file, so
this writes one (under benchmarks/.work/nginx/PORT/, with every path nginx writes)
and then becomes nginx (exec), in the foreground, so the harness stops it as any
server: TERM to its process group.

Nothing of the system's nginx is used: not its config, its logs, or its pid file.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
from pathlib import Path

WORK = Path(__file__).resolve().parent.parent / ".work" / "nginx"
# The types the static scenarios serve, as nginx's own mime.types gives them.
TYPES = {"text/css": "css", "application/javascript": "js", "text/plain": "txt"}


def config(host: str, port: int, route: str, root: str, workers: int, prefix: Path) -> str:
    lines = []
    if os.geteuid() == 0:
        # Workers would switch to nobody, who may not be able to enter the folder.
        lines.append(f"user {pwd.getpwuid(0).pw_name};")
    temp = "\n".join(
        f"    {kind}_temp_path {prefix}/{kind}_temp;"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    types = "\n".join(f"        {mime} {ext};" for mime, ext in TYPES.items())
    route = route.rstrip("/")
    lines += [
        f"worker_processes {workers};",
        f"pid {prefix}/nginx.pid;",
        f"error_log {prefix}/error.log warn;",
        "events { worker_connections 4096; }",
        "http {",
        "    access_log off;",
        temp,
        f"    types {{\n{types}\n    }}",
        "    default_type application/octet-stream;",
        "    sendfile on;",
        "    tcp_nopush on;",
        # wrk keeps its connections: nginx would close each after 1000 requests.
        "    keepalive_requests 1000000;",
        "    server {",
        f"        listen {host}:{port};",
        f"        location {route}/ {{ alias {root.rstrip('/')}/; }}",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description="nginx serving a folder on host:port")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--route", default="/static", help="URL prefix")
    p.add_argument("--root", required=True, help="the folder served")
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args()
    binary = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if binary is None:
        raise SystemExit("nginx not found")
    prefix = WORK / str(args.port)
    prefix.mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    root = str(Path(args.root).resolve())
    conf.write_text(config(args.host, args.port, args.route, root, args.workers, prefix))
    error_log = str(prefix / "error.log")
    os.execv(
        binary,
        [binary, "-p", f"{prefix}/", "-c", str(conf), "-e", error_log, "-g", "daemon off;"],
    )


if __name__ == "__main__":
    main()
