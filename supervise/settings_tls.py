"""The TLS settings (Gunicorn's "SSL" section), declared once.

Apart from settings.py only to keep that table readable; settings.py includes
this section in its single ``SETTINGS`` table. The Python workers build an
``ssl.SSLContext`` from them (tls.py); the rsgi worker a rustls one
(workers/rsgi_tls.py).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from supervise.validators import BOOL, CERT_REQS, EXISTING_FILE, OPT_STR


def declare(add: Callable[..., None]) -> None:
    """Append the TLS section's settings through ``add`` (settings._adder)."""
    add(
        name="keyfile",
        flags=["--keyfile"],
        metavar="FILE",
        validator=EXISTING_FILE,
        help="The TLS private key (PEM). Setting keyfile or certfile serves HTTPS.",
    )
    add(
        name="certfile",
        flags=["--certfile"],
        metavar="FILE",
        validator=EXISTING_FILE,
        help="The TLS certificate chain (PEM), the server's certificate first. Setting "
        "keyfile or certfile serves HTTPS. The private key may follow the certificates "
        "in this file instead of being in keyfile. A certfile without a key and no "
        "keyfile, or a key that is not this certificate's, is refused at start with one "
        "line, as any bad setting (and a HUP to it is refused).",
    )
    add(
        name="keyfile_password",
        flags=["--keyfile-password"],
        metavar="PASSWORD",
        validator=OPT_STR,
        help="The password of an encrypted keyfile. The rsgi worker reads encrypted PKCS#8 "
        "keys (`BEGIN ENCRYPTED PRIVATE KEY`); the other workers whatever OpenSSL reads. "
        "Prefer a config file or SUPERVISE_CMD_ARGS to the command line, where other "
        "users can see it.",
    )
    add(
        name="ca_certs",
        flags=["--ca-certs"],
        metavar="FILE",
        validator=EXISTING_FILE,
        help="CA certificates (PEM) used to verify client certificates; see cert_reqs.",
    )
    add(
        name="cert_reqs",
        flags=["--cert-reqs"],
        metavar="INT",
        validator=CERT_REQS,
        default=int(ssl.CERT_NONE),
        help="Whether clients must present a certificate: 0 or `none` (default), 1 or "
        "`optional`, 2 or `required`, as the `ssl.CERT_*` constants.",
    )
    add(
        name="ciphers",
        flags=["--ciphers"],
        metavar="CIPHERS",
        validator=OPT_STR,
        help="The TLS 1.2 cipher suites, as an OpenSSL cipher list. When not set: "
        "`ECDHE+AESGCM:ECDHE+CHACHA20` (forward secrecy and AEAD only, as the native "
        "server's rustls offers; Python's own default keeps CBC suites). TLS 1.3 suites "
        "are all AEAD and not affected.",
    )
    add(
        name="do_handshake_on_connect",
        flags=["--do-handshake-on-connect"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Complete the TLS handshake as soon as a connection is accepted, instead of "
        "on the first read (see `ssl.SSLContext.wrap_socket`).",
    )
    add(
        name="suppress_ragged_eofs",
        flags=["--suppress-ragged-eofs"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Treat a client that closes the TCP connection without a TLS close_notify "
        "as a normal end of stream instead of an error (see `ssl.SSLContext.wrap_socket`)."
        " --no-suppress-ragged-eofs turns it off.",
    )
