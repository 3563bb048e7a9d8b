"""fastwsgi (C, libuv + llhttp) serving a WSGI app, in one process.

fastwsgi has a `fastwsgi` command, but it imports pkg_resources, which Python 3.12+ venvs
lack; this runs it the way its README does, `fastwsgi.run(app, host, port)`, after
giving it a stand-in where pkg_resources is missing, so every Python of the suite runs
the same launcher.
"""

from __future__ import annotations

import importlib.metadata
import sys
import types

from common import parse


def _pkg_resources_shim() -> None:
    """fastwsgi imports pkg_resources for its version only; setuptools is not in
    Python 3.12+ venvs and recent setuptools drops pkg_resources. Give it the one
    function it calls rather than pin setuptools in the suite's venvs."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        shim = types.ModuleType("pkg_resources")
        shim.get_distribution = lambda name: types.SimpleNamespace(
            version=importlib.metadata.version(name)
        )
        sys.modules["pkg_resources"] = shim


def main() -> None:
    host, port, app = parse("fastwsgi on host:port")
    _pkg_resources_shim()
    import fastwsgi

    fastwsgi.run(app, host, port, loglevel=fastwsgi.LL_ERROR, workers=1)


if __name__ == "__main__":
    main()
