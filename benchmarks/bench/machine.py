"""Machine notes for the report: what a reader needs to judge and reproduce the figures."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def _governor() -> str:
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    try:
        return path.read_text().strip()
    except OSError:
        return "n/a (no cpufreq: virtual machine or fixed clock)"


def _virtualisation() -> str:
    try:
        out = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "none"
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        flags = Path("/proc/cpuinfo").read_text()
        return "a hypervisor" if " hypervisor" in flags else "none detected"
    except OSError:
        return "?"


def describe() -> dict:
    return {
        "host": socket.gethostname(),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": round(_memory_gib(), 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "virtualisation": _virtualisation(),
        "governor": _governor(),
        "harness_python": platform.python_version(),
    }
