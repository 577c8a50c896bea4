"""The impact of a running Valkyrie scrub on upload throughput (issue 4, section 4).

One data directory (the default pair of two local directories) is pre-filled through the
blob store with random files (half the bytes in 256 KiB files, half in 4 MiB). Then a real
``python -m pochta serve`` (as in upload_http.py: free loopback ports, service token,
defaults: ``blobs.sync = "full"``, log level info, SMTP/LMTP on) is started on it once per
(round, mode), with Valkyrie running inside it exactly as ``pochta serve`` runs it: one thread
per disk (``ValkyrieRunner``), configured through ``POCHTA_VALKYRIE``. Three modes:

- ``no_scrub``: ``valkyrie.enabled = false``;
- ``default_budget``: the default budget, 20 MB/s of reads *per disk thread* (both disks of
  the pair are directories on one device here, so up to 40 MB/s of reads on that device);
- ``unthrottled``: ``budget_mb_per_s = null``.

Both scrub modes set ``pass_interval_seconds = 0.01`` (default 3600) so that the scrub never
goes idle during a measurement when a pass ends; how many passes ended during each server run
is reported (``passes_completed``; 0 in every run of the default size: every read was of a
file not read before in that run). Valkyrie's token bucket starts each pass with one second's
burst, so where passes end often (``--quick``'s small data) the default-budget scrub reads more
than 20 MB/s per thread. Before each server start the Valkyrie state is removed
(every run scrubs from position 0) and every stored file is dropped from the page cache
(``POSIX_FADV_DONTNEED``; the virtual disk below may still cache).

In each server run, after a warm-up, client threads (one keep-alive ``httpx.Client`` each)
upload through HTTP, ``PUT /v1/blobs/{key}?magic=M`` streamed in 64 KiB chunks with its
Content-Length, for a fixed time per file size (64 KiB, then 4 MiB; the order alternates
per round). No client starts an upload after the deadline; the measurement ends when the last
one in flight is answered. Every answer must be 201 with ``uploaded: true``. Every file is new:
a random body per size and a random 16-byte suffix per file (the key is the SHA-256 of body +
suffix, computed from the body's hash state, so no hashing is on the client's clock).

Scrub rate during a measurement: the growth of ``rchar`` (bytes read through system calls) of
the Valkyrie threads of the server process (``/proc/<pid>/task/<tid>/io``), identified before
the uploads start as the threads that read while the server is otherwise idle. This includes
the scrubber's few SQLite reads; ``scrub_bytes_check`` compares the threads' total with the
bytes Valkyrie itself recorded in ``valkyrie.sqlite3`` for the whole server run.

Rounds are interleaved (round r runs the modes in an order rotated by r), so every mode sees
the same drift of a shared disk; ratios are per round (mode / no_scrub of the same round).

    python benchmarks/valkyrie_upload_impact.py            # 512 MB pre-filled, 3 rounds
    python benchmarks/valkyrie_upload_impact.py --quick    # 20-40 s (three server starts)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any, cast

import httpx

from _common import SMTP_PORTS, ServeProcess, emit, machine, note, percentile
from pochta.app import build
from pochta.blobs.keys import random_magic
from pochta.blobs.valkyrie import STATE_FILE, ValkyrieState
from pochta.config import load_settings

KiB, MiB = 1 << 10, 1 << 20
TOKEN = "benchmark-service-token-0123456789abcdef"
SEND_CHUNK = 64 * KiB
SIZES = (64 * KiB, 4 * MiB)
SUFFIX = 16  # the random part that makes each uploaded file new

MODES: dict[str, dict[str, Any]] = {
    "no_scrub": {"enabled": False},
    "default_budget": {"enabled": True, "budget_mb_per_s": 20.0, "pass_interval_seconds": 0.01},
    "unthrottled": {"enabled": True, "budget_mb_per_s": None, "pass_interval_seconds": 0.01},
}


def label(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"


# -- the data directory --------------------------------------------------------------------------
def prefill(data: Path, total: int, rng: random.Random) -> tuple[list[Path], dict[str, int]]:
    """Store ``total`` bytes of random files through the blob store; the disks' roots."""
    counts = {
        256 * KiB: max(1, total // 2 // (256 * KiB)),
        4 * MiB: max(1, total // 2 // (4 * MiB)),
    }
    pochta = build(load_settings(data_dir=data, smtp={"enabled": False}))
    try:
        for size, n in counts.items():
            for _ in range(n):
                pochta.blobs.upload(None, random_magic(), [rng.randbytes(size)], size)
        roots = [Path(d.root) for p in pochta.blobs.pairdb.list() for d in p.disks]
    finally:
        pochta.close()
    return roots, {label(s): n for s, n in counts.items()}


def stored_files(roots: list[Path]) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if len(p.name) == 64 and p.is_file()]


def drop_cache(files: list[Path]) -> None:
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def reset_valkyrie_state(data: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (data / f"{STATE_FILE}{suffix}").unlink(missing_ok=True)


def valkyrie_summary(data: Path) -> dict[str, Any]:
    if not (data / STATE_FILE).exists():
        return {"bytes": 0, "checked": 0, "errors": 0, "disks": []}
    state = ValkyrieState(data / STATE_FILE)
    try:
        return state.summary()
    finally:
        state.close()


# -- the server ----------------------------------------------------------------------------------
class Server(ServeProcess):
    """``python -m pochta serve`` on free loopback ports with Valkyrie configured by ``mode``."""

    def __init__(self, data: Path, log: Path, valkyrie: dict[str, Any]) -> None:
        env = {
            "POCHTA_SERVICE_TOKEN": TOKEN,
            "POCHTA_LOG_LEVEL": "info",
            "POCHTA_IMAP__ENABLED": "false",
            "POCHTA_VALKYRIE": json.dumps(valkyrie),
        }
        super().__init__(data, log, env, wait=60, ports=SMTP_PORTS)

    def thread_rchar(self) -> dict[int, int]:
        """Bytes read through system calls so far, per thread of the server."""
        out = {}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                for line in (task / "io").read_text().splitlines():
                    if line.startswith("rchar:"):
                        out[int(task.name)] = int(line.split()[1])
            except OSError:  # the thread ended
                continue
        return out

    def stop(self, watch: list[int] | None = None) -> dict[int, int]:
        """SIGTERM and wait; the last ``rchar`` seen of each thread in ``watch`` (sampled
        every few ms until the process is gone)."""
        last: dict[int, int] = {}
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 60
            while self.proc.poll() is None and time.monotonic() < deadline:
                if watch:
                    now = self.thread_rchar()
                    last.update({t: now[t] for t in watch if t in now})
                time.sleep(0.005)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        return last


def find_scrubbers(server: Server, seconds: float) -> list[int]:
    """The threads that read while nothing else happens: Valkyrie's disk threads."""
    before = server.thread_rchar()
    time.sleep(seconds)
    after = server.thread_rchar()
    return sorted(t for t, n in after.items() if n - before.get(t, n) > 256 * KiB)


# -- the uploads ---------------------------------------------------------------------------------
@dataclass
class Source:
    """New files of one size: a random body and a random suffix per file."""

    size: int
    body: bytes
    state: Any  # the SHA-256 state after the body

    @classmethod
    def make(cls, size: int, rng: random.Random) -> Source:
        body = rng.randbytes(size - SUFFIX)
        return cls(size, body, sha256(body))

    def new(self) -> tuple[str, bytes]:
        suffix = secrets.token_bytes(SUFFIX)
        h = self.state.copy()
        h.update(suffix)
        return h.hexdigest(), suffix

    def chunks(self, suffix: bytes) -> Iterator[bytes]:
        view = memoryview(self.body)
        for i in range(0, len(view), SEND_CHUNK):
            yield cast(bytes, view[i : i + SEND_CHUNK])
        yield suffix


def upload_for(url: str, source: Source, clients: int, seconds: float) -> tuple[float, list[float]]:
    """``clients`` threads upload new files until ``seconds`` have passed; (wall seconds, the
    latency of every upload)."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    start = [0.0]

    def work() -> None:
        rng = random.Random(secrets.randbits(64))
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
        ) as client:
            barrier.wait()
            mine = []
            try:
                while time.perf_counter() - start[0] < seconds:
                    key, suffix = source.new()
                    t0 = time.perf_counter()
                    r = client.put(
                        f"/v1/blobs/{key}",
                        params={"magic": rng.randrange(1, 2**32)},
                        content=source.chunks(suffix),
                        headers={"Content-Length": str(source.size)},
                    )
                    mine.append(time.perf_counter() - t0)
                    if r.status_code != 201 or not r.json()["uploaded"]:
                        raise RuntimeError(f"PUT {key}: {r.status_code} {r.text[:200]}")
            except BaseException as exc:
                errors.append(exc)
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(clients)]
    for t in threads:
        t.start()
    start[0] = time.perf_counter()
    barrier.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start[0]
    if errors:
        raise errors[0]
    return elapsed, latencies


def measure(
    server: Server, scrubbers: list[int], source: Source, clients: int, seconds: float
) -> dict[str, Any]:
    rchar0, cpu0 = server.thread_rchar(), server.cpu_seconds()
    vcpu0 = sum(server.cpu_seconds(t) for t in scrubbers)
    elapsed, lat = upload_for(server.url, source, clients, seconds)
    rchar1, cpu1 = server.thread_rchar(), server.cpu_seconds()
    vcpu1 = sum(server.cpu_seconds(t) for t in scrubbers)
    scrubbed = sum(rchar1.get(t, 0) - rchar0.get(t, 0) for t in scrubbers)
    lat.sort()
    n = len(lat)
    return {
        "uploads": n,
        "seconds": round(elapsed, 3),
        "mb_per_s": round(n * source.size / elapsed / 1e6, 2),
        "uploads_per_s": round(n / elapsed, 1),
        "p50_ms": round(percentile(lat, 0.5) * 1000, 2),
        "p99_ms": round(percentile(lat, 0.99) * 1000, 2),
        "scrub_mb_per_s": round(scrubbed / elapsed / 1e6, 1),
        "server_cpu_share": round((cpu1 - cpu0) / elapsed, 2),  # 1.0 = one core busy
        "scrub_cpu_share": round((vcpu1 - vcpu0) / elapsed, 2),
        "_latencies": lat,
    }


def server_run(
    base: Path,
    data: Path,
    files: list[Path],
    mode: str,
    sources: list[Source],
    clients: int,
    seconds: float,
    identify_seconds: float,
    warmup: float,
) -> dict[str, Any]:
    """One server start in ``mode``: each size measured once."""
    reset_valkyrie_state(data)
    drop_cache(files)
    t0 = time.perf_counter()
    server = Server(data, base / "serve.log", MODES[mode])
    started = time.perf_counter() - t0
    scrubbers: list[int] = []
    last: dict[int, int] = {}
    try:
        scrubbers = find_scrubbers(server, identify_seconds)
        expected = 2 if MODES[mode]["enabled"] else 0
        if len(scrubbers) != expected:
            raise RuntimeError(f"{mode}: {len(scrubbers)} reading threads, expected {expected}")
        for source in sources:  # warm-up: connections, code paths
            upload_for(server.url, source, clients, warmup)
        out = {label(s.size): measure(server, scrubbers, s, clients, seconds) for s in sources}
        last = server.thread_rchar()
    finally:
        last.update(server.stop(scrubbers))
    scrub_rchar = sum(last.get(t, 0) for t in scrubbers)
    summary = valkyrie_summary(data)
    out["_run"] = {
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "server_start_s": round(started, 1),
        "passes_completed": sum(d["passes"] for d in summary["disks"]),
        "scrub_errors": summary.get("errors", 0),
        # bytes Valkyrie recorded for the whole run / bytes its threads read (rchar)
        "scrub_bytes_check": round(summary["bytes"] / scrub_rchar, 3) if scrub_rchar else None,
    }
    return out


# -- the summary ---------------------------------------------------------------------------------
def median_range(values: list[float], digits: int = 2) -> tuple[float, list[float]]:
    return round(statistics.median(values), digits), [
        round(min(values), digits),
        round(max(values), digits),
    ]


def summarize(runs: dict[str, list[dict[str, Any]]], sizes: list[str]) -> dict[str, Any]:
    """Per size and mode: the median over rounds, and [min, max] over rounds."""
    out: dict[str, Any] = {}
    for size in sizes:
        row: dict[str, Any] = {}
        base = [r[size]["mb_per_s"] for r in runs["no_scrub"]]
        for mode, rounds in runs.items():
            cells = [r[size] for r in rounds]
            cell: dict[str, Any] = {"uploads": sum(c["uploads"] for c in cells)}
            for name, values, digits in (
                ("mb_per_s", [c["mb_per_s"] for c in cells], 2),
                ("uploads_per_s", [c["uploads_per_s"] for c in cells], 1),
                ("p50_ms", [c["p50_ms"] for c in cells], 1),
                ("p99_ms", [c["p99_ms"] for c in cells], 1),
                ("scrub_mb_per_s", [c["scrub_mb_per_s"] for c in cells], 1),
                (
                    "ratio_to_no_scrub",
                    [c["mb_per_s"] / b for c, b in zip(cells, base, strict=True)],
                    2,
                ),
            ):
                cell[name], cell[f"{name}_min_max"] = median_range(values, digits)
            cell["server_cpu_share"] = round(
                statistics.median(c["server_cpu_share"] for c in cells), 2
            )
            cell["scrub_cpu_share"] = round(
                statistics.median(c["scrub_cpu_share"] for c in cells), 2
            )
            row[mode] = cell
        out[size] = row
    return out


def brief(cell: dict[str, Any]) -> str:
    return (
        f"{cell['mb_per_s']:.2f} MB/s, {cell['uploads_per_s']:.1f}/s, p50 {cell['p50_ms']:.1f} ms,"
        f" p99 {cell['p99_ms']:.1f} ms, scrub {cell['scrub_mb_per_s']:.1f} MB/s"
    )


def main() -> None:
    args = _args()
    base = Path(tempfile.mkdtemp(prefix="pochta-bench-vk-upload-", dir=args.dir))
    data = base / "data"
    t_start = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "valkyrie_upload_impact",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(base),
    }
    try:
        rng = random.Random(44)
        note(f"pre-filling {args.prefill_mb} MB through the blob store ...")
        roots, stored = prefill(data, args.prefill_mb * 1_000_000, rng)
        sources = [Source.make(size, rng) for size in SIZES]
        result["params"] = {
            "upload_path": "HTTP PUT /v1/blobs/{key} to python -m pochta serve",
            "prefilled": stored,
            "prefilled_mb": args.prefill_mb,
            "clients": args.clients,
            "seconds_per_measurement": args.seconds,
            "rounds": args.rounds,
            "modes": MODES,
            "scrub_threads": "one per disk (2); the budget is per thread",
        }
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        order = list(MODES)
        per_run: list[dict[str, Any]] = []
        for r in range(args.rounds):
            for mode in order[r % len(order) :] + order[: r % len(order)]:
                srcs = sources if r % 2 == 0 else sources[::-1]
                one = server_run(
                    base, data, stored_files(roots), mode, srcs, args.clients, args.seconds,
                    args.identify, args.warmup,
                )  # fmt: skip
                runs[mode].append(one)
                info = {"round": r, "mode": mode, **one.pop("_run")}
                info.update({label(s.size): brief(one[label(s.size)]) for s in srcs})
                per_run.append(info)
                note(json.dumps(info))
        result["results"] = summarize(runs, [label(s) for s in SIZES])
        result["per_run"] = per_run
        at_end = stored_files(roots[:1])
        result["stored_at_end_per_disk"] = {
            "files": len(at_end),
            "mb": round(sum(p.stat().st_size for p in at_end) / 1e6),
        }
        result["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--quick",
        action="store_true",
        help="~20-40 s (three server starts): check the script works",
    )
    p.add_argument("--clients", type=int, default=4, help="concurrent upload clients (4)")
    p.add_argument("--rounds", type=int, default=None, help="rounds of the three modes (3)")
    p.add_argument("--seconds", type=float, default=None, help="per measurement (4)")
    p.add_argument("--prefill-mb", type=int, default=None, help="MB stored before (512)")
    p.add_argument("--dir", default=None, help="where the data directory goes (default: TMPDIR)")
    args = p.parse_args()
    quick = args.quick
    args.rounds = args.rounds or (1 if quick else 3)
    args.seconds = args.seconds or (0.6 if quick else 4.0)
    args.prefill_mb = args.prefill_mb or (16 if quick else 512)
    args.identify = 0.25 if quick else 1.0
    args.warmup = 0.05 if quick else 0.3
    return args


if __name__ == "__main__":
    main()
