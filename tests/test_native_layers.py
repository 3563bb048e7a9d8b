"""The native server's modules import downwards only (native/layers.py):
no import circle among them, and the interface adapters (rsgi, asgi, wsgi)
never import one another."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "native" / "layers.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("native_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_arrow_points_down_and_no_circle() -> None:
    layers = load()
    arrows = layers.uses()
    assert layers.circles(arrows) == []
    assert layers.forbidden(arrows) == []


def test_the_adapters_use_the_bridge_not_one_another() -> None:
    arrows = load().uses()
    adapters = {"rsgi", "asgi", "wsgi"}
    for adapter in adapters:
        assert "bridge" in arrows[adapter] or adapter == "wsgi"
        assert not arrows[adapter] & adapters, adapter
    assert not arrows["server"] & {"py", "bridge", *adapters, "native_server"}


def test_server_keeps_its_one_small_circle() -> None:
    layers = load()
    for group in layers.circles(layers.server_files()):
        assert set(group) <= layers.SERVER_CIRCLE, group


def test_the_checker_sees_an_upward_arrow_and_a_circle() -> None:
    layers = load()
    arrows = {"server": {"bridge"}, "bridge": {"server"}, "rsgi": {"asgi"}, "asgi": set()}
    assert layers.circles(arrows) == [["bridge", "server"]]
    wrong = layers.forbidden(arrows)
    assert "server -> bridge: upwards" in wrong
    assert "rsgi -> asgi: within interface adapters" in wrong


def test_the_use_tree_reader() -> None:
    layers = load()
    assert layers._grouped("{a::b, c, d::{e, f}}") == {"a", "c", "d"}


def test_the_script_says_so() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout
    assert "no circle, every arrow points down" in done.stdout
