"""A WSGI app whose import takes as many seconds as the file named by
SLOW_BOOT_FLAG says, once that file exists (USR2 tests: a new master whose
workers boot slowly while the old master's already serve)."""

import os
import time

_flag = os.environ.get("SLOW_BOOT_FLAG")
if _flag and os.path.exists(_flag):
    with open(_flag) as f:
        time.sleep(float(f.read().strip() or "1"))


def app(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
