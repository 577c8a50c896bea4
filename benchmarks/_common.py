"""What every benchmark script shares: the machine it ran on, and its one JSON line."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any


def _filesystem(path: Path) -> dict[str, str]:
    """Device, type, size and mount options of the filesystem holding ``path`` (Linux)."""
    try:
        line = subprocess.run(
            ["df", "--output=source,fstype,size,target", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()[1]
        device, fstype, kib, target = line.split(maxsplit=3)
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        return {}
    options = ""
    try:
        for mount in Path("/proc/mounts").read_text().splitlines():
            fields = mount.split()
            if len(fields) > 3 and fields[0] == device and fields[1] == target:
                options = fields[3]
    except OSError:
        pass
    return {
        "device": device,
        "type": fstype,
        "size_gib": str(round(int(kib) / 2**20)),
        "mount_options": options,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def machine(where: Path) -> dict[str, Any]:
    """The facts a figure needs next to it: cores, RAM, disk, Python, SQLite, load."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gb": round(_ram_bytes() / 2**30, 1),
        "filesystem": {"path": str(where), **_filesystem(where)},
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def emit(result: dict[str, Any]) -> None:
    """The script's one JSON object on stdout; progress goes to stderr."""
    result["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[index]
