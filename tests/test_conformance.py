"""Replays the shared HTTP/1.1 corpora (../shared/conformance/http1, see its
README.md) against the real server running the echo app.

Per folder the number of cases judged right is recorded below as a minimum
that may only go up. Two things hold for every case, whatever its folder:
the server answers or closes (never hangs, never crashes), and it never
answers a smuggled second request.
"""

from __future__ import annotations

from collections.abc import Iterator

import http1_corpus
import pytest
from conftest import SHARED_DIR, Server
from test_raw_requests import HTTP_WORKERS, serve_echo

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


@pytest.fixture(scope="module", params=HTTP_WORKERS)
def echo_server(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Server]:
    with serve_echo(request.param, tmp_path_factory.mktemp(request.param)) as server:
        yield server


@pytest.mark.parametrize("folder", sorted(MIN_PASSES))
def test_corpus(echo_server: Server, folder: str) -> None:
    cases = http1_corpus.load(CORPORA, folder)
    assert cases, f"no cases in {CORPORA / folder}"
    result = http1_corpus.replay(echo_server.connect, folder, cases)
    assert not result.violations, result.violations
    report = "\n".join(f"  {name}: {why}" for name, why in sorted(result.misses.items()))
    floor = MIN_PASSES[folder]
    assert result.passed >= floor, f"{result.passed}/{result.total} right; misses:\n{report}"
    assert echo_server.workers() == echo_server.boot_workers  # type: ignore[attr-defined]


def test_tables_match_the_corpora() -> None:
    """A new folder in the corpora gets a minimum here instead of being ignored."""
    assert set(http1_corpus.folders(CORPORA)) == set(MIN_PASSES)
