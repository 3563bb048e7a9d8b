"""supervise: a pre-fork server for WSGI, ASGI and RSGI applications."""

__version__ = "0.1.0"
SERVER_SOFTWARE = f"supervise/{__version__}"
