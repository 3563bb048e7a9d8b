"""The smallest WSGI application.

supervise -k sync hello_wsgi:app                 # from this directory
supervise -k gthread --threads 4 hello_wsgi:app
"""


def app(environ, start_response):
    body = b"Hello, world!\n"
    start_response(
        "200 OK",
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
    )
    return [body]
