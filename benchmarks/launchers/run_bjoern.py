"""bjoern (C, libev) serving a WSGI app: bjoern has no command line of its own.

One process, one thread, as bjoern's README runs it: `bjoern.run(app, host, port)`.
"""

from __future__ import annotations

import bjoern
from common import parse


def main() -> None:
    host, port, app = parse("bjoern on host:port")
    bjoern.run(app, host, port)


if __name__ == "__main__":
    main()
