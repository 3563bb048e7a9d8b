"""The one settings dict the native server is built from
(workers/native_settings.py, read by native/src/native_server/config.rs)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from supervise import _native
from supervise.config import Config
from supervise.settings import SETTINGS
from supervise.workers.native_settings import NATIVE_SETTINGS, native_settings


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def app() -> Any:
    return _native.AppCalls(app=lambda scope, proto: None, log_outcome=print, done=None)


def settings(**changed: Any) -> dict[str, Any]:
    cfg = Config({})
    for name, value in changed.items():
        cfg.set(name, value)
    return native_settings(cfg, threads=1, mode="st", ws=True, max_requests=0, tls=None)


def test_every_native_setting_goes_in_under_its_name() -> None:
    made = settings()
    assert set(NATIVE_SETTINGS) <= set(made)
    assert all(SETTINGS[name].native for name in NATIVE_SETTINGS)
    assert made["header_timeout"] == SETTINGS["header_timeout"].default


def test_the_server_takes_every_key_the_worker_makes(loop: asyncio.AbstractEventLoop) -> None:
    made = settings(http2_keep_alive_interval=5, keepalive=0, proxy_protocol=True)
    server = _native.NativeServer(app(), event_loop=loop, fds=[], settings=made)
    server.close()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("nonsense", 1, "no such setting"),
        ("http", "3", "unknown http mode"),
        ("limit_request_line", "long", 'native server setting "limit_request_line"'),
    ],
)
def test_a_key_it_cannot_read_is_refused_by_name(
    loop: asyncio.AbstractEventLoop, key: str, value: Any, says: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=says):
        _native.NativeServer(app(), event_loop=loop, fds=[], settings={key: value})


def test_an_app_of_no_interface_is_refused(loop: asyncio.AbstractEventLoop) -> None:
    with pytest.raises(TypeError, match="AppCalls, AsgiApp or WsgiApp"):
        _native.NativeServer(object(), event_loop=loop, fds=[], settings={})
