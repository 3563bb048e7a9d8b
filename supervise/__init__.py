"""supervise: a pre-fork server for WSGI, ASGI and RSGI applications."""

__version__ = "0.1.0"
# The name pip installs it by: "supervise" on PyPI is another project (runit tools).
DISTRIBUTION = "supervise-server"
SERVER_SOFTWARE = f"supervise/{__version__}"
