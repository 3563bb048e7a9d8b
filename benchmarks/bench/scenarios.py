"""What each scenario requests and what a correct answer looks like."""

from __future__ import annotations

from dataclasses import dataclass

from apps import payload

ALL_INTERFACES = frozenset({"wsgi", "asgi", "rsgi"})
ASYNC_INTERFACES = frozenset({"asgi", "rsgi"})
# Servers answering from a folder without calling the app (supervise's --static-map,
# Granian's static route, nginx): a group of rows of their own, compared with each other.
STATIC = "static"
STATIC_ONLY = frozenset({STATIC})


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    path: str
    # "h1" (wrk), "h2" (h2load: h2c prior knowledge, or ALPN h2 over TLS), "h3" (h3load,
    # Go: HTTP/3 over QUIC, always TLS), "ws" (wsload, Go)
    protocol: str = "h1"
    method: str = "GET"
    body_size: int = 0  # request body for POST, the apps' pattern bytes
    interfaces: frozenset[str] = ALL_INTERFACES
    ws_mode: str = ""  # "echo" | "broadcast"
    # Levels below it are raised to it: at c=128 a 10 ms wait caps every
    # server at 12.8k req/s, which measures the wait, not the server.
    min_level: int = 0
    # Levels are divided by it. Broadcast: every client receives every
    # client's messages, so the work grows with the square of the clients;
    # the profile's 64, 128 and 256 become Granian's 8, 16 and 32 clients.
    level_divisor: int = 1
    # Over TLS (https://, the suite's self-signed certificate): HTTP/2 by ALPN rather than
    # h2c. HTTP/3 always is, whatever this says.
    tls: bool = False

    @property
    def secure(self) -> bool:
        """The server must be started with the certificate, and is asked over https://."""
        return self.tls or self.protocol == "h3"

    @property
    def needs(self) -> str:
        """The server feature this scenario requires beyond HTTP/1.1: "h2" (h2c), "h2tls"
        (ALPN h2), "h3", "ws"."""
        if self.protocol == "h1":
            return ""  # over TLS too: a server the suite cannot start so is skipped
        if self.protocol == "h2" and self.tls:
            return "h2tls"
        return self.protocol

    def levels(self, asked: tuple[int, ...]) -> tuple[int, ...]:
        """The concurrency levels this scenario runs at, of those asked."""
        levels = (max(1, max(level, self.min_level) // self.level_divisor) for level in asked)
        return tuple(dict.fromkeys(levels))

    def request_body(self) -> bytes:
        return payload.pattern(self.body_size) if self.method == "POST" else b""

    def expected_body(self) -> bytes | None:
        """The exact body a correct server returns (None: not an HTTP scenario)."""
        if self.protocol == "ws":
            return None
        return _EXPECTED[self.path](self)


_EXPECTED = {
    "/4b": lambda s: payload.BODY_4B,
    "/str": lambda s: payload.BODY_4B,
    "/1k": lambda s: payload.BODY_1K,
    "/10k": lambda s: payload.BODY_10K,
    "/json": lambda s: payload.json_body(),
    "/echo": lambda s: s.request_body(),
    "/file": lambda s: payload.file_bytes(),
    "/filebytes": lambda s: payload.file_bytes(),
    "/io10": lambda s: payload.BODY_4B,
    "/io100": lambda s: payload.BODY_4B,
    f"{payload.STATIC_ROUTE}/app.css": lambda s: payload.static_bytes("app.css"),
    f"{payload.STATIC_ROUTE}/bundle.js": lambda s: payload.static_bytes("bundle.js"),
}

SCENARIOS = [
    Scenario("get-4b", "GET 4 B plain text", "/4b"),
    Scenario("get-str", "GET 4 B from a str (RSGI response_str; encoded per request)", "/str"),
    Scenario("get-1k", "GET 1 KiB", "/1k"),
    Scenario("get-10k", "GET 10 KiB", "/10k"),
    Scenario("post-4b", "POST echo 4 B (body iterated)", "/echo", method="POST", body_size=4),
    # The many-core part's POST, as the shared many-core recipe (../shared/manycore) sent it.
    Scenario("post-1k", "POST echo 1 KiB (body iterated)", "/echo", method="POST", body_size=1024),
    Scenario(
        "post-10k", "POST echo 10 KiB (body iterated)", "/echo", method="POST", body_size=10240
    ),
    Scenario("json", "GET small JSON", "/json"),
    Scenario("file", "GET 64 KiB file (file_wrapper / pathsend / response_file)", "/file"),
    Scenario("file-bytes", "GET 64 KiB from memory (plain bytes)", "/filebytes"),
    # 768 waiting requests: a 76.8k req/s ceiling at 10 ms, above what one
    # core serves, and under worker_connections' 1000 (where the servers
    # that cap connections start making room).
    Scenario("io10", "long I/O: app waits 10 ms", "/io10", min_level=768),
    Scenario("io100", "long I/O: app waits 100 ms", "/io100", min_level=768),
    # Files from a folder, served by the server without the app (nothing else applies).
    Scenario(
        "static-1k",
        "static file GET 1 KiB .css (the server's own static route)",
        f"{payload.STATIC_ROUTE}/app.css",
        interfaces=STATIC_ONLY,
    ),
    Scenario(
        "static-1m",
        "static file GET 1 MiB .js (the server's own static route)",
        f"{payload.STATIC_ROUTE}/bundle.js",
        interfaces=STATIC_ONLY,
    ),
    Scenario("h2-get", "HTTP/2 GET 4 B (h2c)", "/4b", protocol="h2"),
    Scenario(
        "h2-post", "HTTP/2 POST echo 4 B (h2c)", "/echo", protocol="h2", method="POST", body_size=4
    ),
    # HTTP/3 against the same server's HTTP/2 over TLS: the same certificate, the same
    # requests, the same shape of load (connections = level / streams, 10 streams each).
    Scenario("h2tls-get", "HTTP/2 over TLS GET 4 B (ALPN h2)", "/4b", protocol="h2", tls=True),
    Scenario(
        "h2tls-post",
        "HTTP/2 over TLS POST echo 10 KiB (ALPN h2)",
        "/echo",
        protocol="h2",
        method="POST",
        body_size=10240,
        tls=True,
    ),
    Scenario("h3-get", "HTTP/3 GET 4 B", "/4b", protocol="h3"),
    Scenario(
        "h3-post", "HTTP/3 POST echo 10 KiB", "/echo", protocol="h3", method="POST", body_size=10240
    ),
    Scenario(
        "ws-echo",
        "WebSocket echo (messages/s)",
        "/ws/echo",
        protocol="ws",
        interfaces=ASYNC_INTERFACES,
        ws_mode="echo",
    ),
    Scenario(
        "ws-broadcast",
        "WebSocket broadcast (Granian's: every client sends, every client receives all)",
        "/ws/broadcast",
        protocol="ws",
        interfaces=ASYNC_INTERFACES,
        ws_mode="broadcast",
        level_divisor=8,
    ),
]

BY_NAME = {s.name: s for s in SCENARIOS}
