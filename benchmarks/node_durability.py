"""What a storage node's power loss loses, and what closing it costs (issue 27).

nginx's dav module answers a PUT once its temporary file is renamed into place, and a MOVE
once the rename is done, without fsync: the copy is in the node's page cache, on its disk
only after the kernel's writeback. This script measures, for ext4 mounted with each set of
options in ``MOUNTS``:

- ``crash``: a crash image. Files are PUT and MOVEd to their final names exactly as a loader
  does (pochta's WebDAVDisk: PUT ``tmp/<n>.part``, MOVE to ``ab/cd/<key>``), to one nginx
  node whose disk is an ext4 image on a loop device. The moment the last MOVE is answered,
  the image is copied: the copy holds what the "disk" (the loop device) had been given, and
  nothing the filesystem still held in memory, which is what a power loss leaves. The loop
  device's count of written sectors is read at the answer and after the copy: a copy during
  which anything was written (ext4's periodic journal commit, every 5 s) is thrown away and
  the round run again, so each image is exactly the disk at the moment of the last answer.
  The copy is mounted (its journal replayed, as at boot) and each file checked: intact, there
  with no bytes (its data never reached the disk), there with other bytes, or missing.
- ``upload``: pochta's whole upload of new 64 KB files onto a pair of two nodes (each its own
  image and mount, same options): probe PUT + DELETE, PUT, MOVE on each node, the SQLite
  FileDB; 1 and 4 loader threads, files per second.

The loop device writes into its image file through this machine's page cache and turns a
flush into an fsync of the image, so the cost of each synchronous step includes a real flush
of this machine's disk. Needs root (losetup, mount) and nginx.

    python benchmarks/node_durability.py            # ~1.5 minutes
    python benchmarks/node_durability.py --quick    # ~20 s
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.nginx import NGINX, NginxNode

from _common import emit, machine, note
from pochta.blobs.keys import blob_path
from pochta.blobs.nodes import DiskFactory
from pochta.blobs.nodes.report import write_report
from webdav_put import loader_rate, store_on

MOUNTS: dict[str, tuple[str, bool]] = {  # name: (mount options, chattr +D on the disk)
    "defaults": ("defaults", False),  # ext4's: delayed allocation, data=ordered, commit=5
    "dirsync": ("dirsync", False),  # renames and creations synchronous, data still delayed
    "dirsync,nodelalloc": ("dirsync,nodelalloc", False),  # blocks allocated at write:
    # data=ordered then writes them before the rename's synchronous journal commit
    "nodelalloc + chattr +D": ("nodelalloc", True),  # the same, synchronous only in the
    # disk's own directories (the MOVE into ab/cd/), not in tmp/ nor nginx's body files
    "sync": ("sync", False),  # every write synchronous too
}
IMAGE_MB = 256
FILE_SIZE = 64 << 10


@contextlib.contextmanager
def ext4(where: Path, options: str, dirsync_disk: bool) -> Iterator[tuple[Path, Path, str]]:
    """A fresh ext4 image at ``where``/image on a loop device, mounted with ``options`` at
    ``where``/mnt: (image, mount point, loop device); all undone afterwards. Its inode tables
    and journal are written by mkfs, not later in the background (lazy init off). With
    ``dirsync_disk``, the disk directory ``d`` gets ``chattr +D`` (its new subdirectories
    inherit it) after its ``tmp/`` was made (which does not)."""
    where.mkdir(parents=True)
    image, mnt = where / "image", where / "mnt"
    with image.open("wb") as f:
        f.truncate(IMAGE_MB << 20)
    loop = _run("losetup", "--find", "--show", str(image)).strip()
    try:
        _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop)
        mnt.mkdir()
        _run("mount", "-o", options, loop, str(mnt))
        if dirsync_disk:
            (mnt / "d" / "tmp").mkdir(parents=True)
            _run("chattr", "+D", str(mnt / "d"))
        try:
            yield image, mnt, loop
        finally:
            subprocess.run(["umount", str(mnt)], check=False)
    finally:
        subprocess.run(["losetup", "--detach", loop], check=False)


def written_sectors(loop: str) -> int:
    """Sectors the loop device has written, and is writing (in flight)."""
    fields = Path(f"/sys/block/{Path(loop).name}/stat").read_text().split()
    return int(fields[6]) + int(fields[8])


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def crash(
    workdir: Path, options: str, dirsync_disk: bool, files: int, tries: int = 5
) -> dict[str, Any]:
    """PUT + MOVE ``files`` files to one node on a fresh mount, copy the image the moment
    the last MOVE is answered (again, on a fresh mount, while anything was written during
    the copy), then count what the copy holds."""
    for attempt in range(1, tries + 1):
        where = workdir / f"crash-{attempt}"
        with ext4(where, options, dirsync_disk) as (image, mnt, loop):
            node = NginxNode.start(where / "node", served=mnt)
            try:
                factory = DiskFactory()
                disk = factory(node.disk("d"))
                contents = [os.urandom(FILE_SIZE) for _ in range(files)]
                keys = [hashlib.sha256(c).hexdigest() for c in contents]
                os.sync()  # what came before (mkfs, mkdir) is on the disk: the files count
                t0 = time.perf_counter()
                for i, (key, data) in enumerate(zip(keys, contents, strict=True)):
                    writer = disk.create(f"tmp/{i}.part")
                    writer.write(data)
                    writer.commit()
                    disk.publish(f"tmp/{i}.part", blob_path(key))
                acked = time.perf_counter()
                at_ack = written_sectors(loop)  # the power goes
                snapshot = where / "crash-image"
                shutil.copyfile(image, snapshot)
                during_copy = written_sectors(loop) - at_ack
                copied = time.perf_counter()
                factory.close()
            finally:
                node.stop()
        if during_copy == 0:
            break
        note(f"  {during_copy} sectors written during the copy: again")
    else:
        raise RuntimeError(f"the disk was written during every copy ({tries} tries)")
    found = _count(where / "after", snapshot, keys, contents)
    return {
        "files": files,
        "put_move_per_s": round(files / (acked - t0), 1),
        "copy_ms": round((copied - acked) * 1000, 1),
        "tries": attempt,
        **found,
    }


def _count(where: Path, image: Path, keys: list[str], contents: list[bytes]) -> dict[str, Any]:
    where.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(where)], check=True)  # replays
    try:
        counts: dict[str, Any] = {"intact": 0, "other_bytes": 0, "empty": 0, "missing": 0}
        last = where / "d" / blob_path(keys[-1])
        counts["last_intact"] = last.is_file() and last.read_bytes() == contents[-1]
        for key, data in zip(keys, contents, strict=True):
            path = where / "d" / blob_path(key)
            if not path.is_file():
                counts["missing"] += 1
            elif path.read_bytes() == data:
                counts["intact"] += 1
            elif path.stat().st_size == 0:
                counts["empty"] += 1
            else:
                counts["other_bytes"] += 1
        return counts
    finally:
        subprocess.run(["umount", str(where)], check=False)


def uploads(
    workdir: Path, options: str, dirsync_disk: bool, seconds: float
) -> list[dict[str, Any]]:
    """pochta's uploads of new 64 KB files onto a pair of two nodes on such mounts."""
    with contextlib.ExitStack() as stack:
        nodes = []
        for i in range(2):
            _, mnt, _ = stack.enter_context(ext4(workdir / f"pair-{i}", options, dirsync_disk))
            node = NginxNode.start(workdir / f"pair-node-{i}", served=mnt)
            stack.callback(node.stop)
            nodes.append(node)
        specs = (nodes[0].disk("d"), nodes[1].disk("d"))
        for node in nodes:
            write_report(node.served / "d")
        store = store_on(workdir, "store", specs)
        stack.callback(store.close)
        return [loader_rate(store, FILE_SIZE, threads, seconds) for threads in (1, 4)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--files", type=int, default=50, help="files in each crash image")
    p.add_argument("--dir", default=None, help="where the images go (default: /tmp)")
    args = p.parse_args()
    if os.geteuid() != 0 or NGINX is None or shutil.which("mkfs.ext4") is None:
        sys.exit("needs root (loop devices, mount), nginx and mkfs.ext4")
    seconds = 2.0 if args.quick else 8.0
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-durability-", dir=args.dir))
    result: dict[str, Any] = {
        "benchmark": "node_durability",
        "machine": machine(workdir),
        "file_bytes": FILE_SIZE,
        "seconds_per_figure": seconds,
        "dirty_expire_centisecs": Path("/proc/sys/vm/dirty_expire_centisecs").read_text().strip(),
        "runs": [],
    }
    try:
        for i, (name, (options, dirsync_disk)) in enumerate(MOUNTS.items()):
            note(f"{name}: crash image")
            run: dict[str, Any] = {"mount": name}
            run["crash"] = crash(workdir / str(i), options, dirsync_disk, args.files)
            note(f"{name}: uploads")
            run["upload"] = uploads(workdir / str(i), options, dirsync_disk, seconds)
            result["runs"].append(run)
        base = result["runs"][0]["upload"]
        for run in result["runs"]:
            run["upload_vs_defaults"] = [
                round(r["files_per_s"] / b["files_per_s"], 3)
                for r, b in zip(run["upload"], base, strict=True)
            ]
        emit(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
