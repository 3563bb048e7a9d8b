"""A WSGI app whose request leaves an orphan behind: the child it forks forks
again and exits at once, so the grandchild is re-parented to PID 1 (in a
container: supervise's master), which must reap it when it exits."""

import os
import time


def app(environ, start_response):
    body = b"ok"
    if environ["PATH_INFO"] == "/orphan":
        child = os.fork()
        if child == 0:
            if os.fork() == 0:
                time.sleep(0.2)
                os._exit(0)
            os._exit(0)
        os.waitpid(child, 0)
        body = b"orphaned"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
