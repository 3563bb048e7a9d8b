"""Proxy headers, believed only from the peers in ``forwarded_allow_ips``.

From a trusted peer, ``secure_scheme_headers`` (Gunicorn's semantics) and the
``proto=`` of ``Forwarded`` set ``wsgi.url_scheme``, and ``Forwarded: for=`` or
``X-Forwarded-For`` set REMOTE_ADDR. The client address is found by walking
the list from the right (the hop nearest to us) past the trusted proxies: the
first untrusted hop is the client, since anything left of it was written by
the client itself and proves nothing. With ``*`` every hop is trusted and the
leftmost one wins. Unix-socket peers are trusted, as in Gunicorn: only local
processes allowed by the socket file's permissions can connect.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

_CACHE_LIMIT = 4096


class ContradictoryScheme(ValueError):
    """Two secure-scheme headers of one request disagree (answered 400, as Gunicorn does)."""


def _host(text: str) -> str | None:
    """An address from a proxy header ("1.2.3.4:80", "[::1]:80", "::1"); None if not an IP."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def _forwarded_nodes(value: str) -> list[dict[str, str]]:
    """RFC 7239 ``Forwarded``: one dict of lower-cased parameters per hop."""
    nodes = []
    for element in value.split(","):
        params = {}
        for pair in element.split(";"):
            key, sep, val = pair.partition("=")
            if sep:
                params[key.strip().lower()] = val.strip().strip('"')
        nodes.append(params)
    return nodes


class AllowList:
    """Addresses and networks from a setting (``*``: everyone), matched per peer."""

    def __init__(self, allow: Any) -> None:
        allow = allow or []
        if isinstance(allow, str):
            allow = [a.strip() for a in allow.split(",") if a.strip()]
        self.allow_all = "*" in allow
        self.enabled = bool(allow)
        self._addresses: set[str] = set()
        self._networks: list[Any] = []
        for item in allow:
            if item == "*":
                continue
            net = ipaddress.ip_network(item, strict=False)
            if net.num_addresses == 1:
                self._addresses.add(str(net.network_address))
            else:
                self._networks.append(net)
        self._cache: dict[str, bool] = {}

    def trusts(self, host: str) -> bool:
        """Whether ``host`` is in the list (cached per address)."""
        if self.allow_all:
            return True
        trusted = self._cache.get(host)
        if trusted is None:
            trusted = self._check(host)
            if len(self._cache) < _CACHE_LIMIT:
                self._cache[host] = trusted
        return trusted

    def _check(self, host: str) -> bool:
        if host in self._addresses:
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        mapped = getattr(ip, "ipv4_mapped", None)
        if mapped is not None and str(mapped) in self._addresses:
            return True
        return any(ip in net or (mapped is not None and mapped in net) for net in self._networks)


class ProxyRules(AllowList):
    """Which peers are trusted, and how their headers rewrite the environ."""

    def __init__(self, cfg: Any) -> None:
        # --no-proxy-headers: no peer is trusted with them.
        super().__init__(cfg.forwarded_allow_ips if cfg.proxy_headers else [])
        # (header name lower-cased, its WSGI environ key, the value meaning https)
        self._scheme_headers = [
            (name.lower(), _environ_key(name), value)
            for name, value in (cfg.secure_scheme_headers or {}).items()
        ]
        # Every header resolve() may look at, lower-cased bytes (ASGI header names).
        self.header_names = frozenset(
            [b"forwarded", b"x-forwarded-for"]
            + [name.encode("latin-1") for name, _, _ in self._scheme_headers]
        )
        # The same, as the native Request.fields_named takes them.
        self.header_tuple = tuple(sorted(self.header_names))
        # The same headers as WSGI environ keys: most requests carry none, and
        # looking for them in C costs less than resolve() finding nothing.
        self._environ_keys = tuple(
            ["HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR"] + [key for _, key, _ in self._scheme_headers]
        )

    def _client(self, hosts: list[str | None]) -> tuple[int, str | None]:
        """(index, address) of the client among the hops, left to right."""
        if not hosts:
            return -1, None
        if not self.allow_all:
            for i in range(len(hosts) - 1, -1, -1):
                host = hosts[i]
                if host is None or not self.trusts(host):
                    return i, host
        return 0, hosts[0]

    def apply(self, environ: dict[str, Any]) -> None:
        """Rewrite the environ of a request from a trusted peer; may raise ContradictoryScheme."""
        if not any(map(environ.__contains__, self._environ_keys)):
            return
        scheme, client = self.resolve(environ.get, wsgi=True)
        if scheme is not None:
            environ["wsgi.url_scheme"] = scheme
        if client is not None:
            environ["REMOTE_ADDR"] = client

    def resolve(self, get: Callable[[str], Any], *, wsgi: bool) -> tuple[str | None, str | None]:
        """(scheme, client address) that a trusted peer's headers give, None where
        they say nothing; may raise ContradictoryScheme.

        ``get`` looks a header up by WSGI environ key (``wsgi=True``) or by its
        lower-cased name (ASGI); it returns a str or None.
        """
        scheme = None
        for name, key, expected in self._scheme_headers:
            value = get(key if wsgi else name)
            if value is not None:
                this = "https" if value == expected else "http"
                if scheme is not None and this != scheme:
                    raise ContradictoryScheme("Contradictory scheme headers")
                scheme = this
        client = None
        forwarded = get("HTTP_FORWARDED" if wsgi else "forwarded")
        if forwarded is not None:
            nodes = _forwarded_nodes(forwarded)
            index, client = self._client([_host(n.get("for", "")) for n in nodes])
            proto = nodes[index].get("proto", "").lower() if index >= 0 else ""
            if scheme is None and proto in ("http", "https"):
                scheme = proto
        else:
            xff = get("HTTP_X_FORWARDED_FOR" if wsgi else "x-forwarded-for")
            if xff:
                _, client = self._client([_host(h) for h in xff.split(",") if h.strip()])
        return scheme, client

    def native(self) -> tuple[list[str], Callable[[str, dict[str, str]], Any]] | None:
        """For the rsgi worker's native server (``NativeServer(proxy=...)``): the header
        names to look for, and what to call for a request carrying any of them."""
        if not self.enabled:
            return None
        return self.header_list(), self._resolve_native

    def header_list(self) -> list[str]:
        """``header_names`` as the native server takes them: sorted str."""
        return sorted(n.decode("latin-1") for n in self.header_names)

    def _resolve_native(self, peer: str, found: dict[str, str]) -> tuple[str | None, str | None]:
        """(client as RSGI writes it, "addr:0", scheme) from the headers ``found``
        (lower-cased names); nothing from an untrusted ``peer`` ("addr:port", or
        "" for a unix-socket peer, always trusted). May raise ContradictoryScheme."""
        if peer:
            host = _host(peer)
            if host is None or not self.trusts(host):
                return None, None
        scheme, client = self.resolve(found.get, wsgi=False)
        if client is not None:
            client = f"[{client}]:0" if ":" in client else f"{client}:0"
        return client, scheme


def _environ_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")
