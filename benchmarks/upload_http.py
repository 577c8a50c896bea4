"""Upload throughput through the real HTTP API, next to the physical limit (issue 2, figure 1).

A real ``python -m pochta serve`` runs on a free loopback port with a fresh data directory
(embedded defaults: SQLite FileDB/PairDB with sync=full, one pair of two local directories)
and a service token. Client threads in this process, one keep-alive connection each,
``PUT /v1/blobs/{key}?magic=M`` with its Content-Length: ``--client raw`` (the default,
``rawhttp``: the request line, headers and body in one ``sendmsg``, tens of µs of CPU a
request) or ``--client httpx`` (an ``httpx.Client``, the body streamed in 64 KiB chunks;
1.4-1.7 ms of CPU a 4 KiB PUT here, taken from the two cores the server runs on). The anchor
gets the same kind of client. ``client_cpu_ms_per_file``: this process's CPU while a way ran.
Every file has its own random content, so every PUT is a real upload (both
copies written, fsynced, renamed, the directories fsynced, the record committed); the
answer must be 201 with ``uploaded: true``.

The physical limit, measured in the same run on the same two directories with the same
bytes and the same number of concurrent writers: for each file, create ``tmp/<random>.part``
on both disks, write the content to both in 1 MiB chunks, fsync both (at once), rename both
to ``ab/cd/<key>`` (creating and fsyncing new directories as pochta does) and fsync both
directories; no hashing, no HTTP, no database.

    ratio = pochta MiB/s / physical MiB/s          goal: >= 0.7 for 10 MiB files,
                                                   >= 0.8 for 4 KiB and 256 KiB, 4 clients

The anchor (issue 29), when Debian's ``swift-object`` is installed: OpenStack Swift's object
server (``swift_anchor.py``) takes the same files from the same client threads, in the same
alternating rounds; ``ratio_to_swift`` = pochta files/s / Swift files/s (goal >= 1.5 for
64 KiB with 4 clients). ``--no-swift`` leaves it out; ``--sizes 4KiB 64KiB`` picks cells.

``--against SRC`` (e.g. an export of main's ``src/``) runs a second ``pochta serve`` from that
tree, with its own data directory, in the same alternating rounds (``against`` in each cell,
with its ``ratio`` to the physical pattern and its server CPU per file): an A/B of two codes
on the same disk moments. ``--processes N`` runs this tree's server as ``pochta serve
--processes N`` (``--against-processes`` the other's; ``--against - --processes 2``: two
processes against one, same code); its CPU is then the supervisor's and every server
process's.

Each (size, clients) cell alternates the physical pattern, pochta (and Swift) in rounds, on
files generated (and hashed) before the clock starts.

    python benchmarks/upload_http.py            # full run
    python benchmarks/upload_http.py --quick    # a few seconds, checks the script works
    python benchmarks/upload_http.py --sizes 4KiB --clients 4 --against /tmp/main/src
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any, Protocol, cast

import httpx

import rawhttp
import swift_anchor
from _common import SMTP_PORTS, ServeProcess, emit, machine, note

KiB, MiB = 1 << 10, 1 << 20
GOAL_RATIO = 0.7
TOKEN = "benchmark-service-token-0123456789abcdef"
SEND_CHUNK = 64 * KiB  # what the client streams per write
DISK_CHUNK = 1 * MiB  # what pochta's loader writes per call (blobs.store.CHUNK)

# files per (size, clients) cell in the full run; --quick takes a few of each
FILES = {4 * KiB: 3000, 64 * KiB: 2000, 256 * KiB: 1000, 10 * MiB: 100}
QUICK_FILES = {4 * KiB: 30, 64 * KiB: 20, 256 * KiB: 10, 10 * MiB: 2}
SWIFT_GOAL = 1.5  # pochta / Swift's object server, 64 KiB, 4 clients (issue 29)
FLOOR_GOAL = 0.8  # pochta / physical, 4 KiB and 256 KiB, 4 clients (issue 29)
ROUNDS = 10  # physical and pochta alternate this many times per cell


@dataclass
class File:
    key: str
    data: bytes


def make_files(size: int, n: int, rng: random.Random) -> list[File]:
    out = []
    for _ in range(n):
        data = rng.randbytes(size)
        out.append(File(sha256(data).hexdigest(), data))
    return out


# -- the server --------------------------------------------------------------------------------
class Server(ServeProcess):
    """``python -m pochta serve`` on free loopback ports, SMTP/LMTP included (as deployed)."""

    def __init__(
        self, data: Path, log: Path, log_level: str, src: Path | None = None, processes: int = 1
    ) -> None:
        env = {
            "POCHTA_SERVICE_TOKEN": TOKEN,
            "POCHTA_LOG_LEVEL": log_level,
            "POCHTA_IMAP__ENABLED": "false",
        }
        self.processes = processes
        args = ("--processes", str(processes)) if processes > 1 else ()
        super().__init__(data, log, env, src=src, wait=180, ports=SMTP_PORTS, args=args)

    def cpu(self) -> float:
        """CPU seconds so far: the server process's; with ``--processes N`` the supervisor's
        and every server process's below it."""
        return self.tree_cpu_seconds() if self.processes > 1 else self.cpu_seconds()


# -- the two ways of writing -------------------------------------------------------------------
def _chunks(data: bytes, size: int) -> Iterator[memoryview]:
    view = memoryview(data)
    for i in range(0, len(view), size):
        yield view[i : i + size]


Put = Callable[[File], None]


class _RawClients:
    """``rawhttp.Connection``s, one per client thread (``--client raw``)."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self._where = (host, int(port))
        self._conns: list[rawhttp.Connection] = []

    def new(self) -> rawhttp.Connection:
        conn = rawhttp.Connection(*self._where, timeout=120)
        self._conns.append(conn)
        return conn

    def close(self) -> None:
        for conn in self._conns:
            conn.close()


class PochtaWriter:
    """PUT through the HTTP API; one keep-alive connection per client thread: httpx's (the
    body streamed in SEND_CHUNK pieces) or ``rawhttp``'s (the request in one ``sendmsg``)."""

    def __init__(self, url: str, client: str = "raw") -> None:
        self._url = url
        self._client = client
        self._clients: list[httpx.Client] = []
        self._raw = _RawClients(url)

    def open(self) -> Put:
        rng = random.Random(secrets.randbits(64))
        if self._client == "raw":
            conn = self._raw.new()
            auth = {"Authorization": f"Bearer {TOKEN}"}

            def put_raw(f: File) -> None:
                target = f"/v1/blobs/{f.key}?magic={rng.randrange(1, 2**32)}"
                a = conn.request("PUT", target, auth, f.data)
                if a.status != 201 or json.loads(a.body)["uploaded"] is not True:
                    raise RuntimeError(f"PUT {f.key}: {a.status} {a.body[:200]!r}")

            return put_raw
        client = httpx.Client(
            base_url=self._url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
        )
        self._clients.append(client)

        def put(f: File) -> None:
            r = client.put(
                f"/v1/blobs/{f.key}",
                params={"magic": rng.randrange(1, 2**32)},
                content=cast(Iterator[bytes], _chunks(f.data, SEND_CHUNK)),
                headers={"Content-Length": str(len(f.data))},
            )
            if r.status_code != 201 or not r.json()["uploaded"]:
                raise RuntimeError(f"PUT {f.key}: {r.status_code} {r.text[:200]}")

        return put

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._raw.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _makedirs_durable(path: Path) -> None:
    missing = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        _fsync_dir(directory.parent)


class SwiftWriter:
    """PUT to OpenStack Swift's object server (the anchor), one keep-alive client per thread,
    of the same kind as pochta's."""

    def __init__(self, swift: swift_anchor.SwiftObjectServer, client: str = "raw") -> None:
        self._swift = swift
        self._client = client
        self._clients: list[httpx.Client] = []
        self._raw = _RawClients(swift.url)

    def open(self) -> Put:
        swift = self._swift
        if self._client == "raw":
            conn = self._raw.new()

            def put_raw(f: File) -> None:
                a = conn.request("PUT", swift.path(f.key), swift.headers(len(f.data)), f.data)
                if a.status != 201:
                    raise RuntimeError(f"swift PUT {f.key}: {a.status} {a.body[:200]!r}")

            return put_raw
        client = httpx.Client(base_url=self._swift.url, timeout=120)
        self._clients.append(client)

        def put(f: File) -> None:
            r = client.put(
                swift.path(f.key),
                content=cast(Iterator[bytes], _chunks(f.data, SEND_CHUNK)),
                headers=swift.headers(len(f.data)),
            )
            if r.status_code != 201:
                raise RuntimeError(f"swift PUT {f.key}: {r.status_code} {r.text[:200]}")

        return put

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._raw.close()


class PhysicalWriter:
    """The same durable pattern on the same two directories, without pochta."""

    pool = ThreadPoolExecutor(max_workers=4)  # the second fsync of each file, as the loader's

    def __init__(self, roots: tuple[Path, Path]) -> None:
        self.roots = roots

    def open(self) -> Put:
        return self.put

    def put(self, f: File) -> None:
        name = f"{f.key[0:2]}/{f.key[2:4]}/{f.key}"
        tmp = f"tmp/{secrets.token_hex(16)}.part"
        fds = []
        for root in self.roots:
            _makedirs_durable((root / tmp).parent)
            fds.append(os.open(root / tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        for chunk in _chunks(f.data, DISK_CHUNK):
            for fd in fds:
                view = chunk
                while view:
                    view = view[os.write(fd, view) :]
        other = self.pool.submit(os.fsync, fds[1])  # both at once, as the loader does
        os.fsync(fds[0])
        other.result()
        for fd in fds:
            os.close(fd)
        for root in self.roots:
            final = root / name
            _makedirs_durable(final.parent)
            os.replace(root / tmp, final)
            _fsync_dir(final.parent)

    def close(self) -> None:
        pass


# -- one measurement ---------------------------------------------------------------------------
class Writer(Protocol):
    def open(self) -> Put: ...

    def close(self) -> None: ...


def run(writer: Writer, files: list[File], clients: int) -> float:
    """Write ``files`` with ``clients`` threads taking the next file in turn; wall seconds."""
    puts = [writer.open() for _ in range(clients)]
    it = iter(files)
    lock = threading.Lock()
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def work(put: Put) -> None:
        barrier.wait()
        while True:
            with lock:
                f = next(it, None)
            if f is None:
                return
            try:
                put(f)
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=work, args=(p,)) for p in puts]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    writer.close()
    if errors:
        raise errors[0]
    return elapsed


def measure_cell(
    server: Server,
    roots: tuple[Path, Path],
    files: list[File],
    clients: int,
    swift: swift_anchor.SwiftObjectServer | None = None,
    against: Server | None = None,
    client: str = "raw",
) -> dict[str, Any]:
    """Physical, pochta (and Swift, and the other code's server) in alternating rounds (who
    goes first rotates too), so that all see the same disk: a shared virtual disk's speed
    drifts by a factor of 2 within a minute."""
    rounds = max(1, min(ROUNDS, len(files) // (2 * clients)))
    per = len(files) // rounds
    ways = ["physical", "pochta"] + (["swift"] if swift is not None else [])
    ways += ["against"] if against is not None else []
    times = dict.fromkeys(ways, 0.0)
    ratios: dict[str, list[float]] = {"physical": [], "swift": [], "against": []}
    nbytes = sum(len(f.data) for f in files)
    cpu = dict.fromkeys(ways, 0.0)
    client_cpu = dict.fromkeys(ways, 0.0)  # this process's CPU while a way ran: its clients
    for r in range(rounds):
        part = files[r * per : (r + 1) * per if r < rounds - 1 else len(files)]
        order = ways[r % len(ways) :] + ways[: r % len(ways)]
        if r % 2:
            order.reverse()
        took = {}
        for way in order:
            if way == "physical":
                took[way] = run(PhysicalWriter(roots), part, clients)
            elif way in ("pochta", "against"):
                serving = server if way == "pochta" else against
                assert serving is not None
                cpu0, mine0 = serving.cpu(), time.process_time()
                took[way] = run(PochtaWriter(serving.url, client), part, clients)
                cpu[way] += serving.cpu() - cpu0
                client_cpu[way] += time.process_time() - mine0
            else:
                assert swift is not None
                cpu0, mine0 = swift.cpu_seconds(), time.process_time()
                took[way] = run(SwiftWriter(swift, client), part, clients)
                cpu[way] += swift.cpu_seconds() - cpu0
                client_cpu[way] += time.process_time() - mine0
            times[way] += took[way]
        for way in ratios:
            if way in took:
                ratios[way].append(took[way] / took["pochta"])
    out: dict[str, Any] = {}
    for way in ways:
        out[way] = rates(times[way], len(files), nbytes)
        if way != "physical":
            out[way]["server_cpu_ms_per_file"] = round(cpu[way] / len(files) * 1000, 2)
            out[way]["client_cpu_ms_per_file"] = round(client_cpu[way] / len(files) * 1000, 2)
    # same bytes every way, so the ratio of times is the ratio of rates
    out["ratio"] = round(times["physical"] / times["pochta"], 2)
    out["ratio_per_round"] = _spread(ratios["physical"])
    if swift is not None:
        out["ratio_to_swift"] = round(times["swift"] / times["pochta"], 2)
        out["ratio_to_swift_per_round"] = _spread(ratios["swift"])
    if against is not None:  # the other code: its ratio to physical, and ours to it
        out["against"]["ratio"] = round(times["physical"] / times["against"], 2)
        if swift is not None:
            out["against"]["ratio_to_swift"] = round(times["swift"] / times["against"], 2)
        out["ratio_to_against"] = round(times["against"] / times["pochta"], 2)
        out["ratio_to_against_per_round"] = _spread(ratios["against"])
    return out


def _spread(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "rounds": len(values),
        "min": round(values[0], 2),
        "median": round(values[len(values) // 2], 2),
        "max": round(values[-1], 2),
    }


def rates(elapsed: float, n: int, nbytes: int) -> dict[str, float]:
    return {
        "files": n,
        "seconds": round(elapsed, 3),
        "files_per_s": round(n / elapsed, 1),
        "mib_per_s": round(nbytes / elapsed / MiB, 2),
    }


def label(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="pochta-bench-upload-", dir=ARGS.dir))
    data = base / "data"
    result: dict[str, Any] = {
        "figure": "upload_http",
        "goal": (
            f"ratio >= {GOAL_RATIO} for 10 MiB files; >= {FLOOR_GOAL} for 4 KiB and 256 KiB"
            f" with 4 clients; >= {SWIFT_GOAL}x Swift's object server for 64 KiB, 4 clients"
        ),
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(base),
        "params": {
            "files": {label(s): n for s, n in ARGS.files.items()},
            "clients": ARGS.clients,
            "server_log_level": ARGS.log_level,
            "client": ARGS.client,
            "client_chunk": SEND_CHUNK if ARGS.client == "httpx" else "one sendmsg a request",
            "sync": "full (default)",
        },
        "results": [],
    }
    server = Server(data, base / "serve.log", ARGS.log_level, processes=ARGS.processes)
    result["params"]["processes"] = ARGS.processes
    against: Server | None = None
    if ARGS.against is not None:
        result["params"]["against"] = str(ARGS.against)
        result["params"]["against_processes"] = ARGS.against_processes
        against = Server(
            base / "against",
            base / "against.log",
            ARGS.log_level,
            None if str(ARGS.against) == "-" else ARGS.against,
            processes=ARGS.against_processes,
        )
    swift: swift_anchor.SwiftObjectServer | None = None
    if ARGS.swift and swift_anchor.available():
        swift = swift_anchor.SwiftObjectServer(parent=base).__enter__()
        result["params"]["swift"] = "swift-object-server, defaults (workers = auto), one device"
    elif ARGS.swift:
        note("swift-object-server not installed (Debian: swift-object): no Swift anchor")
    try:
        roots = (data / "disks" / "0" / "physical", data / "disks" / "1" / "physical")
        rng = random.Random(2)
        for size, n in ARGS.files.items():
            for clients in ARGS.clients:
                note(f"{label(size)} x {n}, {clients} client(s): generating ...")
                files = make_files(size, n, rng)
                row = measure_cell(server, roots, files, clients, swift, against, ARGS.client)
                row = {"size": label(size), "bytes": size, "clients": clients, **row}
                note(
                    f"  physical {row['physical']['mib_per_s']:8.2f} MiB/s"
                    f" {row['physical']['files_per_s']:8.1f} files/s | pochta"
                    f" {row['pochta']['mib_per_s']:8.2f} MiB/s"
                    f" {row['pochta']['files_per_s']:8.1f} files/s | ratio {row['ratio']}"
                    f" (rounds {row['ratio_per_round']['min']}..{row['ratio_per_round']['max']})"
                    + (
                        f" | swift {row['swift']['files_per_s']:8.1f} files/s,"
                        f" pochta/swift {row['ratio_to_swift']}"
                        if "swift" in row
                        else ""
                    )
                    + (
                        f" | against {row['against']['files_per_s']:8.1f} files/s,"
                        f" ratio {row['against']['ratio']}, pochta/against"
                        f" {row['ratio_to_against']}"
                        if "against" in row
                        else ""
                    )
                )
                result["results"].append(row)
                del files
    finally:
        server.stop()
        if against is not None:
            against.stop()
        if swift is not None:
            swift.close()
        shutil.rmtree(base, ignore_errors=True)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4], help="concurrent clients")
    p.add_argument(
        "--scale", type=float, default=1.0, help="multiply the number of files of the full run"
    )
    p.add_argument("--sizes", nargs="+", default=None, help="only these sizes (4KiB 256KiB 10MiB)")
    p.add_argument(
        "--no-swift",
        dest="swift",
        action="store_false",
        help="without the Swift object server anchor (run when swift-object-server is installed)",
    )
    p.add_argument(
        "--against",
        type=Path,
        default=None,
        help="a second server from this src/ tree in the same rounds (A/B, e.g. main's);"
        " '-': this tree again (with --against-processes: one process against several)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="pochta serve --processes N for this tree's server (CPU: the supervisor's and"
        " its server processes')",
    )
    p.add_argument(
        "--against-processes",
        type=int,
        default=1,
        help="pochta serve --processes N for the --against server",
    )
    p.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="the HTTP client of pochta and Swift alike: raw (rawhttp: one keep-alive socket,"
        " one sendmsg a request; default) or httpx (the body streamed in 64 KiB pieces)",
    )
    p.add_argument("--log-level", default="info", help="the server's log level (info: default)")
    p.add_argument("--dir", default=None, help="where the data directory goes (default: TMPDIR)")
    args = p.parse_args()
    table = QUICK_FILES if args.quick else FILES
    args.files = {s: max(1, round(n * (1 if args.quick else args.scale))) for s, n in table.items()}
    if args.sizes:
        wanted = {w.replace(" ", "").lower() for w in args.sizes}
        args.files = {
            s: n for s, n in args.files.items() if label(s).replace(" ", "").lower() in wanted
        }
        if not args.files:
            p.error(f"--sizes takes some of: {', '.join(label(s) for s in table)}")
    return args


if __name__ == "__main__":
    ARGS = _args()
    main()
