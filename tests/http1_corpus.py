"""The shared HTTP/1.1 corpora (../shared/conformance/http1) replayed against a
server running the echo app (tests/apps/echo_app.py), and each case judged.

Used by tests/test_conformance.py (supervise's workers, with pinned minimum
counts) and by benchmarks/conformance.py (every peer, for the comparison
table): one replay and one judge, so the figures compare like with like. Needs
nothing but the standard library: the benchmark harness runs it without
supervise installed.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

READ_TIMEOUT = 5.0

# Paths of the second request the smuggling cases hide in a body.
SMUGGLED = re.compile(r"smuggled|pwned|bad_path|evil")

Response = tuple[int, dict[str, str], bytes]


@dataclass
class Case:
    name: str
    raw: bytes
    expect: str
    parsed: list[dict]


@dataclass
class FolderResult:
    """One folder replayed: `misses` are cases judged wrong, `violations` break a
    rule that holds for every case (a hang, an answered smuggled request)."""

    folder: str
    total: int
    misses: dict[str, str] = field(default_factory=dict)
    violations: dict[str, str] = field(default_factory=dict)
    silent: list[str] = field(default_factory=list)  # neither an answer nor a close

    @property
    def passed(self) -> int:
        return self.total - len(self.misses)


def folders(corpora: Path) -> list[str]:
    return sorted(p.name for p in corpora.iterdir() if p.is_dir())


def load(corpora: Path, folder: str) -> list[Case]:
    """A folder's cases, without those that need non-default parser settings (`cfg`)."""
    cases = []
    for meta_path in sorted((corpora / folder).glob("*.json")):
        meta = json.loads(meta_path.read_text())
        if meta.get("cfg"):
            continue
        raw = meta_path.with_suffix(".raw").read_bytes()
        cases.append(Case(meta_path.stem, raw, meta["expect"], meta.get("parsed") or []))
    return cases


def exchange(
    connect: Callable[[float], socket.socket],
    raw: bytes,
    *,
    half_close: bool = True,
    quiet_after: float = 0.3,
) -> tuple[bytes, bool]:
    """Send `raw` on a fresh connection (`connect(timeout)`), read until the
    server closes; (bytes, closed_by_server).

    With `half_close` the client shuts its sending side, so a server waiting
    for more of the message sees the end instead of waiting for a timeout.
    Without it (servers that drop a half-closed connection unanswered, as
    hyper does by default), reading stops once the server has been quiet for
    `quiet_after` seconds after its first byte: a kept-alive connection is
    not a hang.
    """
    chunks = []
    closed = False
    with connect(READ_TIMEOUT) as sock:
        try:
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # refused before we finished: what was answered is still readable
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
                if not half_close:
                    sock.settimeout(quiet_after)
            closed = True
        except ConnectionResetError:
            closed = True
        except (TimeoutError, OSError):
            pass
    return b"".join(chunks), closed


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    """A chunked body and what follows it; lenient, as a client reading answers is."""
    body = []
    while True:
        line_end = data.find(b"\r\n")
        if line_end < 0:
            return b"".join(body), b""
        size_text = data[:line_end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return b"".join(body), b""
        data = data[line_end + 2 :]
        if size == 0:
            # Trailers, if any, end at an empty line.
            if data.startswith(b"\r\n"):
                return b"".join(body), data[2:]
            end = data.find(b"\r\n\r\n")
            return b"".join(body), data[end + 4 :] if end >= 0 else b""
        body.append(data[:size])
        data = data[size + 2 :]


def split_responses(data: bytes) -> list[Response]:
    """Every complete response in `data` (status, lower-case headers, body)."""
    out: list[Response] = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0 or not data.startswith(b"HTTP/1."):
            break
        lines = data[:end].decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        rest = data[end + 4 :]
        if "content-length" in headers:
            n = int(headers["content-length"])
            body, data = rest[:n], rest[n:]
        elif headers.get("transfer-encoding") == "chunked":
            body, data = _dechunk(rest)
        else:
            body, data = rest, b""
        out.append((status, headers, body))
    return out


def echoed(resp: Response) -> dict:
    """What the echo app saw: its body, or its x-echo header where the answer
    has no content (2xx to CONNECT)."""
    try:
        seen = json.loads(resp[2] or resp[1].get("x-echo", ""))
    except ValueError:
        return {}
    return seen if isinstance(seen, dict) else {}


def seen_target(target: str, echoed: dict) -> str:
    """The request-target an echo app can report: all of it through WSGI (RAW_URI);
    through ASGI and RSGI, which have no raw target, its origin form without a fragment
    (percent-decoded where the app only has the decoded path: RSGI, and WSGI servers
    without RAW_URI)."""
    interface = echoed.get("interface")
    if interface not in ("asgi", "rsgi", "wsgi-decoded"):
        return target
    decoded = interface != "asgi"
    target = target.split("#", 1)[0]
    if target == "*":
        return target
    if target.startswith("/"):
        return _decoded_origin(target) if decoded else target
    scheme, sep, rest = target.partition("://")
    if not sep or "/" in scheme:
        return ""  # authority form (CONNECT): nothing reaches an ASGI app
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    origin = rest[cut:]
    origin = origin if origin.startswith("/") else "/" + origin
    return _decoded_origin(origin) if decoded else origin


def _decoded_origin(origin: str) -> str:
    """RSGI's view of an origin-form target: percent-decoded path (UTF-8), raw query."""
    path, sep, query = origin.partition("?")
    raw = urllib.parse.unquote_to_bytes(path.encode("latin-1"))
    return raw.decode("utf-8", "replace") + sep + query


def hostless_http11(raw: bytes) -> bool:
    """RFC 9112 3.2: such a request must get 400, so a 400 is right for it."""
    head = raw.lstrip(b"\r\n").split(b"\r\n\r\n", 1)[0]
    lines = head.split(b"\r\n")
    return lines[0].endswith(b"HTTP/1.1") and not any(
        line.lower().startswith(b"host:") for line in lines[1:]
    )


def judge(case: Case, responses: list[Response]) -> str | None:
    """None when the server did what the case expects, else why not."""
    statuses = [r[0] for r in responses]
    ok = [s for s in statuses if 200 <= s < 300]
    if case.expect == "accept":
        if not statuses:
            return "closed without an answer"
        if statuses[0] == 400 and hostless_http11(case.raw):
            return None
        if not 200 <= statuses[0] < 400:
            return f"answered {statuses[0]}"
        heads = case.raw.lstrip(b"\r\n").split(b"\r\n\r\n")
        for i, (want, resp) in enumerate(zip(case.parsed, responses, strict=False)):
            if i and resp[0] == 400 and i < len(heads) and hostless_http11(heads[i]):
                continue  # a keep-alive worker reached a later hostless request: 400 is right
            seen = echoed(resp)
            got = {k: seen.get(k) for k in ("method", "uri", "body_len")}
            uri = seen_target(want["uri"], seen)
            if got != {"method": want["method"], "uri": uri, "body_len": want["body_len"]}:
                return f"app saw {got}, expected {want}"
        return None
    if case.expect in ("reject", "incomplete"):
        return f"answered {ok[0]}" if ok else None
    if case.expect == "no-second":
        return f"{len(responses)} responses" if len(responses) > 1 else None
    return None  # "any": only the universal rules apply


def replay(
    connect: Callable[[float], socket.socket],
    folder: str,
    cases: list[Case],
    *,
    half_close: bool = True,
) -> FolderResult:
    """Every case on its own connection, judged; the universal rules checked.
    Without `half_close`, a connection left open is no violation (see
    `exchange`); one that stays silent is counted in `silent`."""
    result = FolderResult(folder, len(cases))
    for case in cases:
        try:
            data, closed = exchange(connect, case.raw, half_close=half_close)
        except OSError as exc:  # refused: the server is gone
            result.violations[case.name] = f"no connection ({exc})"
            result.misses[case.name] = "no connection"
            continue
        responses = split_responses(data)
        if not closed and not data:
            result.silent.append(case.name)
        if not closed and half_close:
            result.violations[case.name] = "no answer and no close (hang)"
        smuggled = [r for r in responses if SMUGGLED.search(str(echoed(r).get("uri", "")))]
        why = judge(case, responses)
        if smuggled:
            why = f"answered the smuggled request {echoed(smuggled[0])}"
            result.violations[case.name] = why
        if why:
            result.misses[case.name] = why
    return result
