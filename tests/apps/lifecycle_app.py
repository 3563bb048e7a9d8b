"""A WSGI app for process-lifecycle tests: who answered, slow and stuck requests."""

import os
import time

VERSION = "1"


def app(environ, start_response):
    path = environ["PATH_INFO"]
    query = environ.get("QUERY_STRING", "")
    if path == "/sleep":
        time.sleep(float(query or "1"))
        body = b"slept"
    elif path == "/hang":
        # Stuck for good in a call no worker can schedule around (gevent does not
        # patch os.read): only SIGABRT/SIGKILL get it out.
        read_end, _write_end = os.pipe()
        os.read(read_end, 1)
    elif path == "/pid":
        body = str(os.getpid()).encode()
    elif path == "/version":
        body = VERSION.encode()
    else:
        body = b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
