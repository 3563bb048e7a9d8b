"""The operations settings: accepted forms, one-line errors, and the
command line, config file and docs seeing them like every other setting."""

from __future__ import annotations

import pytest
from conftest import REPO_DIR

from supervise.cli import load_config
from supervise.config import ConfigError


def _cfg(*argv: str):
    return load_config(list(argv), {})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:9100", "127.0.0.1:9100"),
        ("[::1]:9100", "[::1]:9100"),
        (":9100", ":9100"),
        ("unix:/run/app/metrics.sock", "unix:/run/app/metrics.sock"),
    ],
)
def test_metrics_bind_forms(value, expected):
    assert _cfg("--metrics-bind", value).metrics_bind == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("localhost", "has no port"),
        ("::1:9100", "write an IPv6 address as [ADDRESS]:PORT"),
        ("127.0.0.1:99999", "the port must be a number from 0 to 65535"),
        ("unix:", "unix: needs a path"),
    ],
)
def test_metrics_bind_errors_name_the_setting(value, error):
    with pytest.raises(ConfigError) as info:
        _cfg("--metrics-bind", value)
    assert str(info.value).startswith("invalid value for metrics_bind (--metrics-bind): ")
    assert error in str(info.value)


def test_statsd_settings_as_gunicorn_has_them(tmp_path):
    # A gunicorn.conf.py that sets them keeps working with -c.
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text(
        "statsd_host = 'localhost'\nstatsd_prefix = 'myapp'\ndogstatsd_tags = 'env:prod,a:b'\n"
    )
    cfg = _cfg("-c", str(conf))
    assert (cfg.statsd_host, cfg.statsd_prefix, cfg.dogstatsd_tags) == (
        "localhost",
        "myapp",
        "env:prod,a:b",
    )
    assert _cfg("--statsd-host", "unix:/run/statsd.sock").statsd_host == "unix:/run/statsd.sock"
    with pytest.raises(ConfigError, match="tags are comma-separated ASCII"):
        _cfg("--dogstatsd-tags", "env:prod|x")


def test_recycling_settings():
    cfg = _cfg("--max-worker-memory", "512", "--worker-lifetime", "3600")
    assert (cfg.max_worker_memory, cfg.worker_lifetime, cfg.worker_lifetime_jitter) == (
        512,
        3600,
        None,
    )
    assert _cfg("--worker-lifetime-jitter", "30").worker_lifetime_jitter == 30
    with pytest.raises(ConfigError, match="max_worker_memory"):
        _cfg("--max-worker-memory", "-1")


def test_control_socket_is_off_by_default_and_takes_a_path():
    assert _cfg().control_socket is None
    assert _cfg("--control-socket", "/run/app/ctl.sock").control_socket == "/run/app/ctl.sock"
    assert _cfg("--control-socket", "unix:/run/app/ctl.sock").control_socket == "/run/app/ctl.sock"


def test_the_settings_are_documented():
    docs = (REPO_DIR / "docs" / "settings.md").read_text()
    for flag in (
        "--metrics-bind",
        "--statsd-host",
        "--statsd-prefix",
        "--dogstatsd-tags",
        "--control-socket",
        "--max-worker-memory",
        "--worker-lifetime",
        "--worker-lifetime-jitter",
    ):
        assert flag in docs
