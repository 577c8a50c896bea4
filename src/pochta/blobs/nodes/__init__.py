"""Storage nodes: where a disk's bytes live. ``local`` is a directory on this machine."""

from __future__ import annotations

from pathlib import Path

from pochta.blobs.nodes.local import LocalDisk
from pochta.errors import ConfigError
from pochta.types import Disk, DiskSpec


def open_disk(spec: DiskSpec) -> Disk:
    """The Disk implementation for a spec (the only place that maps node kinds)."""
    if spec.node == "local":
        return LocalDisk(Path(spec.root), spec=spec)
    raise ConfigError(f"unsupported storage node {spec.node!r} for disk {spec}")
