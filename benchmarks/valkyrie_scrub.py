"""Valkyrie's scrub rate next to the raw disk read rate (issue 4, section 4).

A fresh data directory (the default pair of two local directories) is filled with N files of
random content through the blob store. Then, in the same run:

- raw read: every stored file of one disk read whole (1 MiB reads) with the page cache
  dropped for each file (``posix_fadvise(DONTNEED)``), no hashing;
- Valkyrie, one full pass over that disk (re-hash of every file against its key, the record
  checked), unthrottled and at the default I/O budget (20 MB/s), each from position 0.

Page-cache note: files are dropped from the cache before each measurement with
``POSIX_FADV_DONTNEED``; the virtual disk underneath may still cache.

    python benchmarks/valkyrie_scrub.py            # 400 files of 256 KiB + 40 of 4 MiB
    python benchmarks/valkyrie_scrub.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.app import build
from pochta.blobs.keys import random_magic
from pochta.blobs.valkyrie import Valkyrie, ValkyrieConfig
from pochta.config import load_settings

KiB, MiB = 1 << 10, 1 << 20


def drop_cache(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def raw_read(root: Path) -> tuple[int, int, float]:
    files = [p for p in root.rglob("*") if p.is_file() and len(p.name) == 64]
    drop_cache(root)
    t0, total = time.perf_counter(), 0
    for path in files:
        with path.open("rb", buffering=0) as f:
            while chunk := f.read(MiB):
                total += len(chunk)
    return len(files), total, time.perf_counter() - t0


def scrub(pochta: Any, data: Path, budget: float | None, disk_root: Path) -> dict[str, Any]:
    state = data / "valkyrie.sqlite3"
    state.unlink(missing_ok=True)
    drop_cache(disk_root)
    config = ValkyrieConfig(budget_mb_per_s=budget)
    valkyrie = Valkyrie.open(pochta.blobs, data, config, locks=pochta.locks)
    try:
        pair, index = next(iter(valkyrie.disks()))
        t0 = time.perf_counter()
        report = valkyrie.run_disk(pair, index)
        elapsed = time.perf_counter() - t0
    finally:
        valkyrie.close()
    c = report.counts
    return {
        "budget_mb_per_s": budget,
        "files": c.checked,
        "verified": c.verified,
        "errors": c.errors,
        "bytes": c.bytes,
        "seconds": round(elapsed, 2),
        "mb_per_s": round(c.bytes / elapsed / 1e6, 1),
        "files_per_s": round(c.checked / elapsed, 1),
        "complete": report.complete,
    }


def main() -> None:
    args = _args()
    counts = {256 * KiB: 40, 4 * MiB: 4} if args.quick else {256 * KiB: 400, 4 * MiB: 40}
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-scrub-", dir=args.dir))
    data = workdir / "data"
    pochta = build(load_settings(data_dir=data, smtp={"enabled": False}))
    try:
        rng = random.Random(4)
        for size, n in counts.items():
            for _ in range(n):
                pochta.blobs.upload(None, random_magic(), [rng.randbytes(size)], size)
        disk_root = Path(pochta.blobs.pairdb.list()[0].disks[0].root)
        files, nbytes, seconds = raw_read(disk_root)
        note(f"raw: {files} files, {nbytes / 1e6:.1f} MB in {seconds:.2f} s")
        result: dict[str, Any] = {
            "benchmark": "valkyrie_scrub",
            "machine": machine(workdir),
            "stored": {f"{s // KiB} KiB": n for s, n in counts.items()},
            "raw_read": {
                "files": files,
                "bytes": nbytes,
                "seconds": round(seconds, 2),
                "mb_per_s": round(nbytes / seconds / 1e6, 1),
                "files_per_s": round(files / seconds, 1),
            },
            "valkyrie_unthrottled": scrub(pochta, data, None, disk_root),
            "valkyrie_default_budget": scrub(pochta, data, 20.0, disk_root),
        }
        raw = result["raw_read"]["mb_per_s"]
        result["unthrottled_vs_raw"] = round(result["valkyrie_unthrottled"]["mb_per_s"] / raw, 2)
        emit(result)
    finally:
        pochta.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--dir", default=None, help="where the data directory goes (default: TMPDIR)")
    return p.parse_args()


if __name__ == "__main__":
    main()
