"""The ASGI WebSocket session's rules, without I/O: one machine for the asgi
worker (``http/asgi_ws.py``) and the engine (``http/asgi_engine_ws.py``).

Theory of operation
-------------------

A ``WebSocketMachine`` holds one session's state and what the app's
``receive`` is to return; it never touches a socket. Its owner, an I/O side,
tells it three kinds of things and does what it answers:

- what the app sends: ``app_sent(message)`` checks the message against the
  state, moves the state on and says what the I/O side is to do: a str or
  bytes is a message to send (the common case, returned bare: no object per
  message), else an action (``Accept``, ``Close``, ``Refuse``, ``Deny``,
  ``Abort``), or None when there is nothing to do yet; a message that does
  not fit the state raises ``RuntimeError``, and a known one once the
  session is over raises ``ClientDisconnected`` (an ``OSError``), as the
  ASGI spec asks;
- what the transport reports: a message from the peer (``received``), what
  the app's receive ends with (``ended``), the session gone (``gone``), or
  both (``closed``);
- what the server decides (the asgi worker; the engine decides these in
  Rust): a graceful stop (``stopping``), a deadline (``server_refuses``,
  ``server_closes``), the app's return (``app_ended``).

``next_event()`` is the app's receive without the waiting: ``websocket.connect``
first, then the peer's messages, then the final ``websocket.disconnect``
again and again; None means "nothing yet, wait for the transport".

States: HANDSHAKE (no answer yet), DENYING (a ``websocket.http.response``
under way), OPEN, CLOSING (our close frame is out, the peer's is due), CLOSED.

Choices where the ASGI spec leaves room (Uvicorn answers some of them
differently):

- an app that returns without accepting gets 403, as a ``websocket.close``
  before accept does (Uvicorn: 403 too, 500 only when the app raised);
- an app that raises before accepting gets 500, after accepting a close 1011;
- an app that returns after accepting without closing: close 1000;
- every ``send`` once our close frame went out, or the session is over,
  raises ``ClientDisconnected``, as the spec asks;
- a graceful stop closes with 1012, or answers the handshake with 503.

An accept or a denial moves the state on at once: the engine's accept is
awaited, and Rust counts the session accepted from the call on, so a close
racing it is a close, not a refusal. The I/O side checks what the machine
cannot (the codec refuses a subprotocol, the response head builder a status
or a header): when it cannot carry the answer out it calls
``accept_failed`` or ``denial_failed``, and the handshake is where it was,
so the app's end still answers it (500).

Where the two I/O sides differ, and why the machine leaves it to them:

- The asgi worker parses frames itself and pushes each message into the
  machine; messages parsed after our close frame are dropped there (the
  frame layer's rule). The engine's messages wait in Rust and are pulled
  into the machine by receive, so whatever Rust queued before the end is
  delivered; that is why ``received`` never drops and why our close does
  not set what receive ends with: the asgi worker reports it with
  ``ended`` as soon as its close frame is written, the engine when Rust
  hands over the close message after the queued ones.
- The engine learns that the session is over only from Rust: the close
  message a receive takes sets what receive ends with (``ended``), and a
  send Rust refuses ends the session (``gone``). So on the engine a
  ``websocket.close`` after the app saw the peer's close is ignored (Rust
  has nothing left to close), where the asgi worker, which learns of the
  peer's close frame when it parses it, raises ``ClientDisconnected``.
- What the app's return or exception leaves to do (403/500 before accept,
  1000/1011 after) is ``app_ended`` for the asgi worker; the engine's twin
  is ``finish()`` in native/src/rsgi/ws_protocol.rs, which also records the
  outcome for the access log and the metrics, and stays in Rust.
- The handshake request's own checks, pings, deadlines and flow control are
  I/O: the codec (asgi worker) or Rust (engine).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, NamedTuple

from supervise.http.errors import ClientDisconnected


class _StateMeta(type):
    def __repr__(cls) -> str:
        return cls.__name__


class _State(metaclass=_StateMeta):
    """A state of the session; the classes themselves are the values."""


class HANDSHAKE(_State):
    """The app has not answered the upgrade request yet."""


class DENYING(_State):
    """The app is sending an HTTP denial response (websocket.http.response.*)."""


class OPEN(_State):
    """Accepted: messages flow both ways."""


class CLOSING(_State):
    """Our close frame is out (app close, shutdown, failure); the peer's is due."""


class CLOSED(_State):
    """No more frames either way: refused, denied, closed, or the transport is gone."""


# -- what the I/O side is told to do -----------------------------------------------


class Accept(NamedTuple):
    """Answer the handshake with a 101 carrying these (checked) fields."""

    subprotocol: str | None
    headers: list[tuple[bytes, bytes]]


class Close(NamedTuple):
    """Send our close frame (checked: a code an endpoint may send)."""

    code: int
    reason: str


class Refuse(NamedTuple):
    """Answer the handshake with a plain HTTP error and end the session."""

    status: int


class Deny(NamedTuple):
    """One part of the app's denial response: the head goes out with the
    ``first``; the session ends with the ``last``."""

    status: int
    headers: list[Any]
    body: bytes
    first: bool
    last: bool


class Abort(NamedTuple):
    """Drop the connection: a denial response cut short cannot be completed."""


Action = Accept | Close | Refuse | Deny | Abort
# What app_sent asks for: a message to send (text if a str), an action, or nothing.
Answer = str | bytes | Action | None

_ABORT = Abort()
_RESTART = (1012, "service restart")


class WebSocketMachine:
    """One ASGI WebSocket session's state and receive queue (see the module docs)."""

    __slots__ = ("_denial", "_final", "_head_out", "_inbox", "state")

    def __init__(self) -> None:
        self.state: type[_State] = HANDSHAKE
        # What receive has to give, then what it ends with, again and again.
        self._inbox: deque[dict[str, Any]] = deque([{"type": "websocket.connect"}])
        self._final: dict[str, Any] | None = None
        # The denial response under way: (status, headers); whether its head is out.
        self._denial: tuple[int, list[Any]] = (0, [])
        self._head_out = False

    # -- the app -------------------------------------------------------------------

    def next_event(self) -> dict[str, Any] | None:
        """What the app's receive returns now; None: wait for the transport."""
        if self._inbox:
            return self._inbox.popleft()
        return self._final

    @property
    def queued(self) -> int:
        """The peer's messages (and the connect) the app has not taken yet."""
        return len(self._inbox)

    @property
    def over(self) -> bool:
        """Our close is out or the session ended: a ClientDisconnected that the
        app lets through is the normal end of its loop, not an error."""
        return self.state is CLOSING or self.state is CLOSED

    def app_sent(self, message: dict[str, Any]) -> Answer:
        """The app's send: what it asks for, once checked against the state."""
        kind = message.get("type")
        state = self.state
        if state is OPEN:
            if kind == "websocket.send":
                return send_payload(message)
            return self._sent_open(kind, message)
        if state is HANDSHAKE:
            return self._sent_handshake(kind, message)
        if state is DENYING:
            return self._sent_denial_body(kind, message)
        if kind not in _KNOWN_EVENTS:
            raise RuntimeError(f"Unexpected ASGI message {kind!r} on a WebSocket")
        raise ClientDisconnected("the WebSocket connection is closed")

    def accept_failed(self) -> None:
        """The I/O side could not send the Accept: the handshake is unanswered again."""
        self.state = HANDSHAKE

    def denial_failed(self) -> None:
        """The I/O side could not send a Deny: the denial is still under way."""
        self.state = DENYING
        # Only a last part sets it while denying (a lost connection ends the
        # session before any part), and nothing runs between it and this call.
        self._final = None

    def app_ended(self, *, failed: bool) -> Action | None:
        """The app returned (or raised): finish what it left open."""
        state = self.state
        if state is HANDSHAKE:
            return self._refuse(500 if failed else 403)
        if state is DENYING:
            self.state = CLOSED
            return _ABORT
        return self.server_closes(1011 if failed else 1000, "")

    # -- the transport -------------------------------------------------------------

    def received(self, data: str | bytes) -> int:
        """A whole message from the peer, for the app's receive; how many are queued now."""
        key = "text" if isinstance(data, str) else "bytes"
        self._inbox.append({"type": "websocket.receive", key: data})
        return len(self._inbox)

    def ended(self, code: int = 1006, reason: str = "") -> None:
        """What the app's receive ends with, once its queue is empty (the first
        end reported counts: the peer's close, ours, or 1006 for a dropped one)."""
        if self._final is None:
            # int(): the libraries hand out IntEnum members; the app gets a plain int.
            self._final = {"type": "websocket.disconnect", "code": int(code), "reason": reason}

    def gone(self) -> None:
        """The session is over (no more frames either way); what receive ends
        with may still be on its way."""
        self.state = CLOSED

    def closed(self, code: int = 1006, reason: str = "") -> None:
        """The session is over and ended with this code."""
        self.state = CLOSED
        self.ended(code, reason)

    # -- the server ----------------------------------------------------------------

    def stopping(self) -> Action | None:
        """A graceful stop: close 1012; a handshake not yet answered gets 503."""
        if self.state is HANDSHAKE:
            self.ended(*_RESTART)
            return self._refuse(503)
        return self.server_closes(*_RESTART)

    def server_refuses(self, status: int) -> Refuse | None:
        """The server answers the handshake itself (the app took too long)."""
        return self._refuse(status) if self.state is HANDSHAKE else None

    def server_closes(self, code: int, reason: str) -> Close | None:
        """The server closes an open session (a ping unanswered, a stop, the app's end)."""
        if self.state is not OPEN:
            return None
        self.state = CLOSING
        return Close(code, reason)

    # -- the rules, state by state --------------------------------------------------

    def _sent_open(self, kind: Any, message: dict[str, Any]) -> Close:
        if kind == "websocket.close":
            code, reason = close_args(message)
            self.state = CLOSING
            return Close(code, reason)
        raise RuntimeError(f"Expected 'websocket.send' or 'websocket.close', got {kind!r}")

    def _sent_handshake(self, kind: Any, message: dict[str, Any]) -> Action | None:
        if kind == "websocket.accept":
            subprotocol, headers = accept_fields(message)
            self.state = OPEN
            return Accept(subprotocol, headers)
        if kind == "websocket.close":
            # Before the handshake a close is a refusal (ASGI: HTTP 403).
            return self._refuse(403)
        if kind == "websocket.http.response.start":
            self._denial = (int(message["status"]), list(message.get("headers") or ()))
            self.state = DENYING
            return None  # the head goes out with the first body part
        raise RuntimeError(
            "Expected 'websocket.accept', 'websocket.close' or "
            f"'websocket.http.response.start' before the handshake, got {kind!r}"
        )

    def _sent_denial_body(self, kind: Any, message: dict[str, Any]) -> Deny:
        if kind != "websocket.http.response.body":
            raise RuntimeError(f"Expected 'websocket.http.response.body', got {kind!r}")
        body = bytes(message.get("body") or b"")
        last = not message.get("more_body", False)
        first, self._head_out = not self._head_out, True
        if last:
            self.closed()
        status, headers = self._denial
        return Deny(status, headers, body, first, last)

    def _refuse(self, status: int) -> Refuse:
        self.closed()
        return Refuse(status)


_KNOWN_EVENTS = frozenset(
    {
        "websocket.accept",
        "websocket.send",
        "websocket.close",
        "websocket.http.response.start",
        "websocket.http.response.body",
    }
)


def send_payload(message: dict[str, Any]) -> str | bytes:
    """The one payload of a websocket.send event."""
    text = message.get("text")
    data = message.get("bytes")
    if text is not None and data is None:
        if not isinstance(text, str):
            raise TypeError(f"websocket.send 'text' must be str, not {type(text).__name__}")
        return text
    if data is not None and text is None:
        return bytes(data)
    raise RuntimeError("websocket.send needs exactly one of 'bytes' and 'text'")


def close_args(message: dict[str, Any]) -> tuple[int, str]:
    """The code and reason of an app's websocket.close, checked as RFC 6455 7.4 wants."""
    code = message.get("code")
    code = 1000 if code is None else code
    reason = message.get("reason") or ""
    if not (isinstance(code, int) and (code in _SENDABLE_CODES or 3000 <= code <= 4999)):
        raise RuntimeError(f"websocket.close: {code!r} is not a close code an endpoint may send")
    if len(reason.encode()) > 123:
        raise RuntimeError("websocket.close: the reason is over 123 bytes in UTF-8")
    return code, reason


# RFC 6455 7.4.1 + IANA: the codes below 3000 an endpoint may put in a close frame.
_SENDABLE_CODES = frozenset(
    {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014}
)
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")


def accept_fields(message: dict[str, Any]) -> tuple[str | None, list[tuple[bytes, bytes]]]:
    """The subprotocol and the extra headers of a websocket.accept, checked."""
    checked = []
    for name, value in message.get("headers") or ():
        name, value = bytes(name), bytes(value)
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise RuntimeError(f"websocket.accept: invalid header {name!r}: {value!r}")
        checked.append((name, value))
    subprotocol = message.get("subprotocol")
    if subprotocol is not None and any(n.lower() == b"sec-websocket-protocol" for n, _ in checked):
        raise RuntimeError(
            "websocket.accept: give the subprotocol in 'subprotocol' or in 'headers', not both"
        )
    return subprotocol, checked
