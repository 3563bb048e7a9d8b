"""Replays the shared HTTP/1.1 corpora (../shared/conformance/http1, see its
README.md) against the real server running the echo app.

Per folder the number of cases judged right is recorded below as a minimum
that may only go up. Two things hold for every case, whatever its folder:
the server answers or closes (never hangs, never crashes), and it never
answers a smuggled second request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from conftest import SHARED_DIR, Server, seen_target
from test_raw_requests import HTTP_WORKERS, Response, exchange, serve_echo, split_responses

CORPORA = SHARED_DIR / "conformance" / "http1"

pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/conformance is absent")

# Cases judged right per folder (cases with a non-empty `cfg` are skipped).
# The llhttp misses are deliberate: HTTP/0.9 "GET /" and RTSP/ICE versions
# get 400; "M-SEARCH *" gets 400 (asterisk-form is for OPTIONS only); CONNECT,
# Upgrade, ANNOUNCE and data after "Connection: close" are served the plain
# HTTP way where llhttp pauses or errors.
MIN_PASSES = {
    "garden": 76,
    "gunicorn-invalid": 63,
    "gunicorn-valid": 50,
    "llhttp-request": 88,
    "rfc9112-own": 12,
    "smuggler-default": 134,
}

# Paths of the second request the smuggling cases hide in a body.
SMUGGLED = re.compile(r"smuggled|pwned|bad_path|evil")


@dataclass
class Case:
    name: str
    raw: bytes
    expect: str
    parsed: list[dict]


def load(folder: str) -> list[Case]:
    cases = []
    for meta_path in sorted((CORPORA / folder).glob("*.json")):
        meta = json.loads(meta_path.read_text())
        if meta.get("cfg"):
            continue
        raw = meta_path.with_suffix(".raw").read_bytes()
        cases.append(Case(meta_path.stem, raw, meta["expect"], meta.get("parsed") or []))
    return cases


def hostless_http11(raw: bytes) -> bool:
    """RFC 9112 3.2: such a request must get 400, so a 400 is right for it."""
    head = raw.lstrip(b"\r\n").split(b"\r\n\r\n", 1)[0]
    lines = head.split(b"\r\n")
    return lines[0].endswith(b"HTTP/1.1") and not any(
        line.lower().startswith(b"host:") for line in lines[1:]
    )


def echoed(resp: Response) -> dict:
    """What the echo app saw: its body, or its x-echo header where the answer
    has no content (2xx to CONNECT)."""
    try:
        return json.loads(resp[2] or resp[1].get("x-echo", ""))
    except ValueError:
        return {}


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


@pytest.fixture(scope="module", params=HTTP_WORKERS)
def echo_server(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Server]:
    with serve_echo(request.param, tmp_path_factory.mktemp(request.param)) as server:
        yield server


@pytest.mark.parametrize("folder", sorted(MIN_PASSES))
def test_corpus(echo_server: Server, folder: str) -> None:
    cases = load(folder)
    assert cases, f"no cases in {CORPORA / folder}"
    misses: dict[str, str] = {}
    violations: dict[str, str] = {}
    for case in cases:
        data, closed = exchange(echo_server, case.raw)
        responses = split_responses(data)
        if not closed:
            violations[case.name] = "no answer and no close (hang)"
        smuggled = [r for r in responses if SMUGGLED.search(str(echoed(r).get("uri", "")))]
        if smuggled:
            violations[case.name] = f"answered the smuggled request {echoed(smuggled[0])}"
        why = judge(case, responses)
        if why:
            misses[case.name] = why
    assert not violations, violations
    passed = len(cases) - len(misses)
    report = "\n".join(f"  {name}: {why}" for name, why in sorted(misses.items()))
    floor = MIN_PASSES[folder]
    assert passed >= floor, f"{passed}/{len(cases)} right; misses:\n{report}"
    assert echo_server.workers() == echo_server.boot_workers  # type: ignore[attr-defined]


def test_tables_match_the_corpora() -> None:
    """A new folder in the corpora gets a minimum here instead of being ignored."""
    assert {p.name for p in CORPORA.iterdir() if p.is_dir()} == set(MIN_PASSES)
