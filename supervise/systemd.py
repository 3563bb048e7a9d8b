"""sd_notify without libsystemd: one datagram to $NOTIFY_SOCKET.

Used for Type=notify units: READY=1 once workers serve (not before, unlike
Gunicorn), RELOADING=1/READY=1 around HUP, STOPPING=1, and MAINPID= when a
USR2 child master takes over, so systemd follows the new master.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time


def notify(*states: str) -> bool:
    """Send ``states`` (e.g. "READY=1") to systemd; False when not under systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall("\n".join(states).encode())
        return True
    return False


def reloading() -> bool:
    # systemd >= 253 wants MONOTONIC_USEC with RELOADING=1 for Type=notify-reload.
    return notify(
        "RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}"
    )
