"""TLS for the rsgi worker: rustls, built in Rust from the same settings the
Python workers turn into an ``ssl.SSLContext`` (no Python context is made).

What rustls cannot honour is refused at boot with one line rather than
ignored: the ``ssl_context`` hook (it returns an ``ssl.SSLContext``) and
``ciphers`` (an OpenSSL cipher list; rustls offers TLS 1.3 and TLS 1.2 with
ECDHE and AEAD suites only). ``do_handshake_on_connect`` and
``suppress_ragged_eofs`` need nothing: the handshake runs as soon as a
connection is accepted (bounded by ``header_timeout``), and a client that
leaves without close_notify just ends its connection.
"""

from __future__ import annotations

from typing import Any

from supervise import _native
from supervise.hooks import HOOKS


def refusal(cfg: Any) -> str | None:
    """Why these TLS settings cannot be served by -k rsgi, or None."""
    if cfg.ssl_context is not HOOKS["ssl_context"].default:
        return (
            "-k rsgi does TLS with rustls, built from certfile, keyfile, keyfile_password, "
            "ca_certs and cert_reqs; it cannot use the ssl_context hook (an ssl.SSLContext): "
            "remove the hook, or use a Python worker class"
        )
    if cfg.ciphers:
        return (
            "-k rsgi does TLS with rustls, which offers its own cipher suites only (TLS 1.3, "
            "and TLS 1.2 with ECDHE and AEAD); it cannot take an OpenSSL cipher list: "
            "unset ciphers"
        )
    if not cfg.certfile:
        return "TLS needs a certificate: set certfile (and keyfile)"
    return None


def native_tls(cfg: Any) -> Any:
    """The rustls configuration; ValueError (one line) when it cannot be built."""
    reason = refusal(cfg)
    if reason:
        raise ValueError(reason)
    return _native.NativeTls(
        certfile=cfg.certfile,
        keyfile=cfg.keyfile,
        password=cfg.keyfile_password,
        ca_certs=cfg.ca_certs,
        cert_reqs=cfg.cert_reqs,
    )
