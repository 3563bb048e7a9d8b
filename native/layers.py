"""The native server's modules and which import which: `python native/layers.py`.

Reads every `use crate::…`, `crate::…` path and `super::…` path of
native/src (comments and strings left out) and reports, per top-level
module of the crate, which others it uses, then every import circle among
them and every arrow the layer rule forbids. Exit status 1 when there is
one: tests/test_native_layers.py keeps the rule.

The rule (docs/internals.md, "Layers of the native server"): a module
imports only from its own layer or the ones below it, and the interface
adapters (rsgi, asgi, wsgi) never import one another.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent / "src"

# Lowest first. A module may use any module of a lower layer, and its own
# layer's only where the layer says so (None: every one of them).
LAYERS: list[tuple[str, set[str], bool]] = [
    (
        "leaves",
        {
            "coarse_clock",
            "x509_name",
            "heap",
            "proxy",
            "relay",
            "http1_codec",
            "static_files",
            "access_log",
        },
        True,
    ),
    ("python face of the leaves", {"py"}, False),
    ("server (no Python types)", {"server"}, False),
    ("bridge (the Python boundary)", {"bridge"}, False),
    ("interface adapters", {"rsgi", "asgi", "wsgi"}, False),
    ("the handle Python holds", {"native_server"}, False),
]
# Leaves that use other leaves.
LEAF_ARROWS = {("http1_codec", "coarse_clock"), ("relay", "http1_codec")}

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_USE = re.compile(r"\buse\s+crate::(\{[^;]*\}|[A-Za-z_]\w*)", re.S)
_PATH = re.compile(r"\bcrate::([A-Za-z_]\w*)")
_SUPER = re.compile(r"\b((?:super::)+)([A-Za-z_]\w*)")


def module_of(path: Path) -> str:
    """The crate's top-level module a file belongs to (lib.rs: "lib")."""
    top = path.relative_to(SRC).with_suffix("").parts[0]
    # A module's tests in a file beside it (`#[path]`) belong to it.
    return top.removesuffix("_tests")


def _code(text: str) -> str:
    return _STRING.sub('""', _COMMENT.sub("", text))


def _grouped(tree: str) -> set[str]:
    """The first path segments of a `{a::b, c, d::{e, f}}` use tree."""
    names, depth, current = set(), 0, ""
    for ch in tree[1:-1]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            names.add(current)
            current = ""
            continue
        current += ch if depth == 0 else ""
    names.add(current)
    return {n.strip().split("::")[0] for n in names if n.strip()}


def _super_target(path: Path, hops: int, name: str) -> str | None:
    """The top-level module `super::…::name` reaches from `path`."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    at = parts[: len(parts) - hops]
    return at[0] if at else name


def uses() -> dict[str, set[str]]:
    """Top-level module -> the other top-level modules it uses."""
    arrows: dict[str, set[str]] = defaultdict(set)
    tops = {module_of(p) for p in SRC.rglob("*.rs")}
    for path in sorted(SRC.rglob("*.rs")):
        here = module_of(path)
        code = _code(path.read_text())
        found: set[str] = set()
        for tree in _USE.findall(code):
            found |= _grouped(tree) if tree.startswith("{") else {tree}
        found |= set(_PATH.findall(code))
        for hops, name in _SUPER.findall(code):
            target = _super_target(path, hops.count("super"), name)
            if target:
                found.add(target)
        arrows[here] |= {t for t in found if t in tops and t != here}
    return dict(arrows)


def layer_of(module: str) -> int | None:
    for i, (_, members, _) in enumerate(LAYERS):
        if module in members:
            return i
    return None


def forbidden(arrows: dict[str, set[str]]) -> list[str]:
    """Every arrow the rule forbids, as text."""
    wrong = []
    for source, targets in sorted(arrows.items()):
        for target in sorted(targets):
            s, t = layer_of(source), layer_of(target)
            if s is None or t is None:
                if source != "lib":
                    wrong.append(f"{source} -> {target}: a module of no layer")
                continue
            if t > s:
                wrong.append(f"{source} -> {target}: upwards")
            elif t == s and (source, target) not in LEAF_ARROWS:
                wrong.append(f"{source} -> {target}: within {LAYERS[s][0]}")
    return wrong


def circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(arrows.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(arrows):
        if node not in index:
            visit(node)
    return found


# server/ keeps one small import circle, hyper's kind: the dispatcher's
# `serve_h1` is given the server's shared state, which holds the dispatcher,
# and WebSocket sessions are served with that state. No other file may join.
SERVER_CIRCLE = {"dispatch", "shared", "websocket", "ws_session"}
_SERVER_PATH = re.compile(r"\b(?:super|crate::server)::(\{[^;]*?\}|[a-z_]\w*)")


def server_files() -> dict[str, set[str]]:
    """File of server/ -> the other files of server/ it uses."""
    folder = SRC / "server"
    files = {p.stem: p for p in folder.glob("*.rs")}
    arrows: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        for tree in _SERVER_PATH.findall(_code(path.read_text())):
            found |= _grouped(tree) if tree.startswith("{") else {tree}
        arrows[name] = {f for f in found if f in files and f != name}
    return arrows


def main() -> int:
    arrows = uses()
    for source in sorted(arrows):
        print(f"{source:14} -> {', '.join(sorted(arrows[source])) or '-'}")
    groups, wrong = circles(arrows), forbidden(arrows)
    for group in circles(server_files()):
        print("server/ circle:", " <-> ".join(group))
        if not set(group) <= SERVER_CIRCLE:
            wrong.append(f"server/ circle beyond {sorted(SERVER_CIRCLE)}: {group}")
    for group in groups:
        print("circle:", " <-> ".join(group))
    for line in wrong:
        print("forbidden:", line)
    if not groups and not wrong:
        print("no circle, every arrow points down")
    return 1 if groups or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
