"""Protocol code shared by the workers, and the Python side of the native server.

Nothing here knows which process model runs it: the WSGI layer works on a
blocking-style connection object, so the sync worker, the gthread pool and
gevent greenlets all drive the same code.
"""
