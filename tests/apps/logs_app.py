"""An app for the logging and file-mode tests (WSGI):

- ``/print``: prints a line to stdout and one to stderr (for --capture-output);
- ``/files``: creates the file ``made.txt`` and the folder ``made.d`` in $FILES_DIR,
  as an app writing uploads would, and answers their modes in octal;
- anything else: "ok".
"""

import os
import sys


def app(environ, start_response):
    path = environ["PATH_INFO"]
    body = b"ok"
    if path == "/print":
        print("printed to stdout by the app", flush=True)
        print("printed to stderr by the app", file=sys.stderr, flush=True)
    elif path == "/files":
        folder = os.environ["FILES_DIR"]
        made = os.path.join(folder, "made.txt")
        with open(made, "w") as f:
            f.write("data")
        os.mkdir(os.path.join(folder, "made.d"))
        modes = [os.stat(os.path.join(folder, n)).st_mode & 0o777 for n in ("made.txt", "made.d")]
        body = " ".join(oct(m) for m in modes).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
