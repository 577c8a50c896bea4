"""The storage host's side of a WebDAV disk: which registered disk a local directory is.

A storage host runs Valkyrie for its own disks against the directories behind its nginx
(``pochta valkyrie run --disk /srv/pochta/disk1``): reading and re-hashing locally, not over
HTTP. To know which disk of which pair a directory is, it writes a file with a random name into
the directory and asks each registered WebDAV disk for it (HEAD): the one that has it is served
from this directory. Nothing to configure twice, and a directory that no registered disk
serves (a typo, an nginx pointing elsewhere) is found out before any scrubbing starts.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pochta.errors import DiskError
from pochta.types import Disk, DiskSpec


def served_disk(
    directory: Path, specs: Iterable[DiskSpec], open_disk: Callable[[DiskSpec], Disk]
) -> DiskSpec | None:
    """The WebDAV disk among ``specs`` whose node serves ``directory``; None when none does.
    OSError when the directory cannot take the marker file."""
    candidates = [s for s in dict.fromkeys(specs) if s.node != "local"]
    if not candidates:
        return None
    marker = secrets.token_hex(16).encode()
    name = f"tmp/whoami-{marker.decode()}.part"  # Valkyrie removes it if we cannot
    path = directory / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(marker)

    def serves(spec: DiskSpec) -> bool:
        try:
            return open_disk(spec).size(name) == len(marker)
        except DiskError:
            return False  # a node that is down serves nothing we can use now

    try:
        with ThreadPoolExecutor(max_workers=min(8, len(candidates))) as pool:
            for spec, found in zip(candidates, pool.map(serves, candidates), strict=True):
                if found:
                    return spec
        return None
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
