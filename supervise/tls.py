"""The server's ``ssl.SSLContext``, built in each worker after fork.

Built from keyfile/keyfile_password/certfile/ca_certs/cert_reqs/ciphers, then handed to the
``ssl_context(config, default_ssl_context_factory)`` hook, which returns the
context to use: the default one, that one adjusted (a minimum TLS version, an
extra CA) or one of its own. The same hook as Gunicorn's, so configs carry over.
"""

from __future__ import annotations

import re
import ssl
from typing import Any

# TLS 1.2 suites offered when `ciphers` is not set: forward secrecy and AEAD
# only, the ones rustls offers on the native server. Python's own default list
# keeps CBC suites (padding-oracle attacks: LUCKY13); TLS 1.3's are all AEAD.
AEAD_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


class TLSConfigError(Exception):
    """The TLS settings cannot make a context; str() names the files and the reason."""


# RSA, EC, PKCS#8 and encrypted PKCS#8 keys alike end their BEGIN line so.
_PEM_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")


class _NoPassword(Exception):
    """Raised instead of letting OpenSSL prompt on the terminal for a key's password."""


def _holds_private_key(path: str) -> bool:
    with open(path, encoding="ascii", errors="replace") as f:
        return _PEM_PRIVATE_KEY.search(f.read()) is not None


def key_pair_problem(certfile: str, keyfile: str | None, password: str | None) -> str | None:
    """What keeps ``certfile`` and ``keyfile`` from being a certificate and its
    key, in one line; None when they are, or when what is wrong is better told
    by the TLS load itself (an unreadable certificate, an encrypted key).

    OpenSSL reports a missing key as "PEM lib" and a wrong one as "key values
    mismatch"; these two mistakes are common enough to deserve plain words.
    """
    try:
        if keyfile is None and not _holds_private_key(certfile):
            return (
                f"certfile {certfile!r} holds no private key and no keyfile is given: "
                "set keyfile (--keyfile KEY.pem), or put the key in certfile after "
                "the certificates"
            )
        if keyfile is not None and not _holds_private_key(keyfile):
            return f"keyfile {keyfile!r} holds no private key (no PEM PRIVATE KEY block)"
    except OSError:
        return None

    def ask() -> str:
        if password is None:
            raise _NoPassword
        return password

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(certfile, keyfile, password=ask)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            if keyfile is None:
                return (
                    f"the private key in certfile {certfile!r} is not the key of its "
                    "certificate (a key from another certificate?)"
                )
            return (
                f"keyfile {keyfile!r} is not the key of the certificate in certfile "
                f"{certfile!r} (a key from another certificate?)"
            )
    except (_NoPassword, OSError, ValueError, TypeError):
        pass
    return None


def _default_context(cfg: Any) -> ssl.SSLContext:
    if not cfg.certfile:
        raise TLSConfigError("TLS needs a certificate: set certfile (and keyfile)")
    # Purpose.CLIENT_AUTH makes a server-side context with Python's secure
    # defaults (TLS 1.2 or later, no compression, sound ciphers).
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=cfg.ca_certs)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"cannot load ca_certs {cfg.ca_certs!r}: {exc}") from None
    try:
        context.load_cert_chain(
            certfile=cfg.certfile, keyfile=cfg.keyfile, password=cfg.keyfile_password
        )
    except (OSError, ssl.SSLError) as exc:
        problem = key_pair_problem(cfg.certfile, cfg.keyfile, cfg.keyfile_password)
        raise TLSConfigError(
            problem or f"cannot load certfile {cfg.certfile!r} / keyfile {cfg.keyfile!r}: {exc}"
        ) from None
    context.verify_mode = ssl.VerifyMode(cfg.cert_reqs)
    try:
        context.set_ciphers(cfg.ciphers or AEAD_CIPHERS)
    except ssl.SSLError as exc:
        raise TLSConfigError(f"invalid ciphers {cfg.ciphers!r}: {exc}") from None
    # Only HTTP/1.1 is spoken by the Python workers; say so to ALPN clients.
    context.set_alpn_protocols(["http/1.1"])
    return context


# handshake_step's answers while the handshake waits on the socket.
WANTS_READ = "read"
WANTS_WRITE = "write"


def handshake_step(sock: Any, log: Any, peer: Any) -> str | bool:
    """One non-blocking step of a server-side TLS handshake (the workers that
    poll: gthread, sync): True once done, WANTS_READ or WANTS_WRITE while it
    waits, False when it failed (logged at debug; the caller closes)."""
    try:
        sock.do_handshake()
    except ssl.SSLWantReadError:
        return WANTS_READ
    except ssl.SSLWantWriteError:
        return WANTS_WRITE
    except (OSError, ValueError) as exc:
        # Port scanners, plain HTTP on the TLS port, expired client certs...
        log.debug("TLS handshake with %s failed: %s", peer, exc)
        return False
    return True


def create_ssl_context(cfg: Any) -> ssl.SSLContext:
    """The context the workers wrap accepted sockets with."""
    context = cfg.ssl_context(cfg, lambda: _default_context(cfg))
    if not isinstance(context, ssl.SSLContext):
        raise TLSConfigError(
            f"the ssl_context hook returned {type(context).__name__}, not an ssl.SSLContext"
        )
    return context


def server_certificate(certfile: str | None) -> str | None:
    """The first certificate of ``certfile`` in PEM: the one the server sends
    (ASGI's tls extension's ``server_cert``; the chain's others follow it).
    An ``ssl_context`` hook that loads another certificate is not seen here."""
    if not certfile:
        return None
    with open(certfile, encoding="ascii", errors="replace") as f:
        text = f.read()
    begin = text.find("-----BEGIN CERTIFICATE-----")
    end = text.find("-----END CERTIFICATE-----", begin)
    if begin < 0 or end < 0:
        return None
    return text[begin : end + len("-----END CERTIFICATE-----")] + "\n"
