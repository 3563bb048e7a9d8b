"""Core sets for the deploy table on a machine with many cores: the server on one set, the
load generator on another (`--server-cpus 0-7 --load-cpus 8-15`).

Lists are written as taskset and /sys/devices/system/cpu write them ("0-7", "0,2,4",
"0-15:2"), so the command line reads like the taskset line it becomes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """A taskset CPU list as cores: "0-3,8,10-14:2" -> (0, 1, 2, 3, 8, 10, 12, 14), sorted,
    each core once.
    Raises ValueError on anything taskset would refuse or read differently."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            raise ValueError(f"empty item in the CPU list {text!r}")
        span, _, stride_text = part.partition(":")
        first_text, dash, last_text = span.partition("-")
        try:
            first = int(first_text)
            last = int(last_text) if dash else first
            stride = int(stride_text) if stride_text else 1
        except ValueError:
            raise ValueError(
                f"{part!r} in {text!r} is not a core, a range or a range:stride"
            ) from None
        if stride_text and not dash:
            raise ValueError(f"{part!r}: a stride needs a range (e.g. 0-15:2)")
        if first < 0 or last < first or stride < 1:
            raise ValueError(f"{part!r} in {text!r}: cores count up from 0, stride >= 1")
        cpus.update(range(first, last + 1, stride))
    return tuple(sorted(cpus))


def compact(cpus: Iterable[int]) -> str:
    """The shortest list for a set, (0, 1, 2, 3, 8) -> "0-3,8": how the report names it
    (taskset accepts it too)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class Split:
    """The deploy table's cores: the server's process tree on `server`, the load generator
    on `load`, with one load-generator thread per load core."""

    server: tuple[int, ...]
    load: tuple[int, ...]

    @property
    def load_threads(self) -> int:
        return len(self.load)

    def describe(self) -> dict:
        """What the results JSON keeps of it: the cores, and their taskset lists for
        readers (and charts.py, which runs without this package)."""
        return {
            "server": list(self.server),
            "load": list(self.load),
            "server_cpus": compact(self.server),
            "load_cpus": compact(self.load),
        }


def split(server_text: str, load_text: str, allowed: Iterable[int]) -> Split:
    """The two sets from the command line, checked against the cores this run may use:
    overlapping sets would have the client take the server's cores, the very thing the
    split is there to prevent."""
    server, load = parse_cpu_list(server_text), parse_cpu_list(load_text)
    usable = set(allowed)
    outside = sorted((set(server) | set(load)) - usable)
    if outside:
        raise ValueError(
            f"cores {compact(outside)} are not ones this run may use ({compact(usable)})"
        )
    shared = sorted(set(server) & set(load))
    if shared:
        raise ValueError(f"the server and load sets share cores {compact(shared)}")
    return Split(server, load)


def halves(allowed: Iterable[int]) -> Split:
    """The first half of the cores for the server, the rest for the load generator: the
    many-core part's split when none is given (on 2 cores: 0 and 1)."""
    cores = tuple(sorted(set(allowed)))
    if len(cores) < 2:
        raise ValueError("splitting server and load generator needs at least 2 cores")
    middle = len(cores) // 2
    return Split(cores[:middle], cores[middle:])
