"""Workers keep freed malloc memory for reuse (native/src/heap.rs) unless the
user tuned glibc's malloc; checked in fresh interpreters, as a worker is one."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)

_CALL = "from supervise import _native; print(_native.keep_freed_heap())"


def _applied(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    clean.pop("GLIBC_TUNABLES", None)
    result = subprocess.run(
        [sys.executable, "-c", _CALL], env={**clean, **env}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_applies_by_default() -> None:
    assert _applied() == "True"


@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_TRIM_THRESHOLD_": "131072"},
        {"MALLOC_TOP_PAD_": "0"},
        {"MALLOC_MMAP_THRESHOLD_": "65536"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"},
    ],
)
def test_the_users_malloc_settings_win(env: dict[str, str]) -> None:
    assert _applied(**env) == "False"


def test_other_tunables_do_not_count() -> None:
    assert _applied(GLIBC_TUNABLES="glibc.pthread.rseq=0") == "True"
