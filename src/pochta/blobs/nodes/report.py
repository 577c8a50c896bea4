"""Free space of a WebDAV disk: a small file the storage host writes, that its nginx serves.

nginx's dav module (and the dav-ext module's PROPFIND) cannot say how much room a disk has:
there is no RFC 4331 quota property. So the storage host, which runs Valkyrie for its disk
anyway (``pochta valkyrie run --disk <dir>``), writes ``<dir>/.pochta-free`` every few seconds:
``{"free": bytes, "total": bytes}`` from statvfs. A loader GETs it through the same nginx and
judges its age by the node's own clock (the answer's ``Date`` minus ``Last-Modified``), so
clocks of different machines never meet. A report older than ``max_age`` counts as no report:
the disk then takes no new files (placement sees 0 bytes free) until its host reports again,
rather than filling a disk whose free space nobody knows.

Why not a configured capacity: it says nothing about what the disk holds now. Why not a status
endpoint in nginx: stock nginx has none for disk space (it would need njs or Lua).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import threading
from pathlib import Path

from pochta.errors import DiskError

log = logging.getLogger(__name__)

REPORT_NAME = ".pochta-free"
MAX_REPORT_BYTES = 4096


def measure(root: Path) -> dict[str, int]:
    st = os.statvfs(root)
    return {"free": st.f_bavail * st.f_frsize, "total": st.f_blocks * st.f_frsize}


def write_report(root: Path) -> dict[str, int]:
    """Write ``root/.pochta-free`` now (a new file renamed over the old: a reader never sees
    half of it). OSError when the directory cannot take it."""
    report = measure(root)
    tmp = root / f"{REPORT_NAME}.{secrets.token_hex(4)}"
    try:
        tmp.write_text(json.dumps(report) + "\n")
        os.replace(tmp, root / REPORT_NAME)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return report


def parse_report(body: bytes, where: str) -> int:
    """The free bytes of a report's body; DiskError when it is not one."""
    try:
        if len(body) > MAX_REPORT_BYTES:
            raise ValueError("too long")
        free = json.loads(body)["free"]
        if isinstance(free, bool) or not isinstance(free, int) or free < 0:
            raise ValueError(f"free = {free!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise DiskError(f"{where}: {REPORT_NAME} is not a free-space report ({exc})") from None
    return free


class Reporter:
    """Writes a disk's report every ``every`` seconds in a thread until ``stop``."""

    def __init__(self, root: Path, every: float = 10.0) -> None:
        self.root = root
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pochta-free-report", daemon=True)

    def start(self) -> None:
        write_report(self.root)  # at once, and an error here is the caller's to see
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                write_report(self.root)
            except OSError as exc:
                log.warning("free-space report of %s: %s", self.root, exc.strerror or exc)
