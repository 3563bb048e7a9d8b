"""ASGI scopes from a parsed request head (the native parser's ``Request``).

The per-connection part (client, server, extensions, trust) is computed once
per connection by ``ConnectionInfo``; a request adds only its own keys.
"""

from __future__ import annotations

import ssl
from typing import Any

from supervise import _native
from supervise.http.asgi_context import AsgiContext


def _sockaddr(addr: Any) -> tuple[str, int] | None:
    """A peer or local address as ASGI wants it; None for a unix socket."""
    if isinstance(addr, tuple) and len(addr) >= 2:
        return str(addr[0]), int(addr[1])
    return None


# What each HTTP request sets (fill_asgi_scope's keys, and the state: the
# scope is built by the native connection, native/src/asgi/worker/connection.rs).
_REQUEST_KEYS = ("state", "http_version", "method", "path", "raw_path", "query_string", "headers")


class ConnectionInfo:
    """What every request on one connection shares."""

    __slots__ = ("client", "extensions", "http_base", "scheme", "server", "trusted")

    def __init__(self, ctx: AsgiContext, transport: Any, peer: Any = None) -> None:
        # ``peer``: the client a PROXY header named; None: the socket's own peer.
        if peer is None:
            peer = transport.get_extra_info("peername")
        self.client = _sockaddr(peer)
        self.server = _sockaddr(transport.get_extra_info("sockname"))
        if self.client is not None:
            self.trusted = ctx.proxy.enabled and ctx.proxy.trusts(self.client[0])
        else:
            # Unix-socket peers are trusted for proxy headers, as in the WSGI workers.
            self.trusted = ctx.proxy.enabled
        self.scheme = ctx.scheme
        self.extensions: dict[str, Any] = {
            "http.response.pathsend": {},
            "http.response.trailers": {},
            "http.response.early_hint": {},
        }
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.extensions["tls"] = _tls_extension(ssl_object, ctx.server_cert)
        # The keys of an http scope that are the connection's: each request
        # copies them (one C-level copy) instead of building them again. The
        # request's own keys are here too, as placeholders every request
        # replaces: the copy then has room for them all, and filling it
        # replaces values instead of growing the dict.
        self.http_base: dict[str, Any] = {
            "type": "http",
            "asgi": ctx.asgi,
            "server": self.server,
            "client": self.client,
            "root_path": ctx.root_path,
            "scheme": self.scheme,
            "extensions": self.extensions,
            **dict.fromkeys(_REQUEST_KEYS),
        }


def _tls_extension(ssl_object: ssl.SSLObject, server_cert: str | None) -> dict[str, Any]:
    peer = ssl_object.getpeercert(binary_form=True)
    return {
        "server_cert": server_cert,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(peer)] if peer else [],
        "client_cert_name": _native.certificate_subject(peer) if peer else None,
        "client_cert_error": None,
        "tls_version": _TLS_VERSIONS.get(ssl_object.version() or ""),
        "cipher_suite": _cipher_number(ssl_object),
    }


def _cipher_number(ssl_object: ssl.SSLObject) -> int | None:
    """The IANA number the spec asks for (0x1301 for TLS_AES_128_GCM_SHA256):
    OpenSSL's cipher id carries it in its low 16 bits; ``cipher()`` gives a name."""
    cipher = ssl_object.cipher()
    if cipher is None:
        return None
    for known in ssl_object.context.get_ciphers():
        if known["name"] == cipher[0]:
            return known["id"] & 0xFFFF
    return None


# The numbers the ASGI TLS extension uses for the protocol versions.
_TLS_VERSIONS = {"TLSv1": 0x0301, "TLSv1.1": 0x0302, "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


def _websocket_scope(ctx: AsgiContext, info: ConnectionInfo, req: Any) -> dict[str, Any]:
    """The keys of a websocket scope that are not the extension's; the
    request's own (path, raw_path, query_string, headers, ...) come from the
    native builder the engine uses too (native/src/py/asgi_scope.rs), as for
    an http scope."""
    root = ctx.root_path
    scope = {
        "type": "websocket",
        "asgi": ctx.asgi,
        "server": info.server,
        "client": info.client,
        "root_path": root,
        "state": ctx.lifespan_state.copy(),
    }
    req.fill_asgi_scope(scope, root, False)
    return scope


def websocket_scope(ctx: AsgiContext, info: ConnectionInfo, req: Any) -> dict[str, Any]:
    """The scope of a WebSocket handshake request."""
    scope = _websocket_scope(ctx, info, req)
    scope["scheme"] = "wss" if info.scheme == "https" else "ws"
    scope["subprotocols"] = [
        p.strip()
        for name, value in req.headers
        if name == b"sec-websocket-protocol"
        for p in value.decode("latin-1").split(",")
        if p.strip()
    ]
    extensions: dict[str, Any] = {"websocket.http.response": {}}
    if "tls" in info.extensions:
        extensions["tls"] = info.extensions["tls"]
    scope["extensions"] = extensions
    if info.trusted:
        _apply_proxy_headers(ctx, scope, req, websocket=True)
    return scope


def _apply_proxy_headers(ctx: AsgiContext, scope: dict, req: Any, *, websocket: bool) -> None:
    found = req.fields_named(ctx.proxy.header_tuple)
    if found is not None:
        apply_proxy_fields(ctx, scope, found, websocket=websocket)


def apply_proxy_fields(
    ctx: AsgiContext, scope: dict[str, Any], found: dict[str, str], *, websocket: bool
) -> None:
    """The scheme and client a trusted peer's proxy fields (``found``, by
    name) give; may raise ContradictoryScheme."""
    scheme, client = ctx.proxy.resolve(found.get, wsgi=False)
    if scheme is not None:
        scope["scheme"] = {"http": "ws", "https": "wss"}[scheme] if websocket else scheme
    if client is not None:
        scope["client"] = (client, 0)
