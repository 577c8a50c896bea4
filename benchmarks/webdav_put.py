"""Blob PUT through WebDAV storage nodes (issue 17), next to nginx's own PUT rate, same run.

Two nginx processes (Debian's nginx with its dav module, the config of tests/nginx.py = the
README's, one worker each) on free loopback ports, their disks in one temporary directory of
this machine's filesystem. Measured, for 64 KB and 10 MB files of random bytes:

- ``pochta_webdav_pair``: ``BlobStore.upload`` of new content onto a pair of disks on the two
  nodes, with the embedded FileDB/PairDB (SQLite, sync=full): placement, the probe PUT of the
  upload's temporary file on both disks at once, both copies sent at once (replacing the
  probe's bytes) while SHA-256/CRC-32 are computed, MOVE to ``ab/cd/<key>`` on both, the
  FileDB upsert. 1 and 4 loader threads;
- ``pochta_local_pair``: the same upload onto a pair of two local directories (the embedded
  default), for reference;
- ``letters_webdav_pair``: letters of 4 attachments of 16 KB each onto the WebDAV pair, one
  letter after the other, the 4 uploads of a letter started together (as delivery starts
  them): letters/s, time and CPU (loader, nginx) per letter;
- ``nginx_put_wrk``: the anchor: wrk PUTting the same size to one node, 1 and 4
  connections (nginx's own rate for one copy: no probe, no MOVE, no second node);
- ``nginx_put_urllib3`` / ``nginx_put_httpx``: one Python thread PUTting straight to one node,
  then GETting (streamed, 1 MiB reads), with each client (why urllib3: see
  pochta/blobs/nodes/client.py).

Each pochta upload is 3 requests to each of 2 nodes (probe PUT, PUT, MOVE; the same request
to both nodes at once: 3 round trips in series), before issue 29 it was 4 (a probe file of
its own, PUT then DELETE, one node after the other: 6 round trips); the ratio to nginx is per
stored file (a file = two copies).

With ``--tls`` the nodes are README's: HTTPS with client certificates (``ssl_verify_client
on``), every certificate signed by one CA made for the run, and the loader shows its own
(``[blobs] node_cert_file``); only the pochta figures are measured then (wrk sends no client
certificate).

    python benchmarks/webdav_put.py            # ~1 minute
    python benchmarks/webdav_put.py --quick    # a few seconds
    python benchmarks/webdav_put.py --tls      # the same over HTTPS with client certificates
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.nginx import NginxNode
from tests.tlsfiles import TestCA

from _common import emit, machine, note
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.nodes import DiskFactory
from pochta.blobs.nodes.client import client_context
from pochta.blobs.nodes.report import write_report
from pochta.blobs.pairs.sqlite import SQLitePairDB
from pochta.blobs.store import BlobStore
from pochta.types import DiskSpec

SIZES = {"64KB": 64 << 10, "10MB": 10 << 20}
LETTER = (4, 16 << 10)  # a letter's small attachments: how many, bytes each
WRK = shutil.which("wrk")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of processes ``pids`` (Linux /proc; gone ones count 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def loader_rate(
    store: BlobStore,
    size: int,
    threads: int,
    seconds: float,
    nodes: list[NginxNode] | None = None,
) -> dict[str, Any]:
    """Uploads of new random content for ``seconds`` from ``threads`` threads; with
    ``nodes``, the CPU time each file cost this process and the nodes' nginx (a figure
    that other load on the machine changes less than the rate)."""
    pool = os.urandom(size + 4096)
    done = [0] * threads
    stop = time.monotonic() + seconds
    start = threading.Barrier(threads + 1)

    def work(i: int) -> None:
        rng = random.Random(i)
        start.wait()
        while time.monotonic() < stop:
            cut = rng.randrange(4096)
            data = pool[cut : cut + size]
            chunks = [data[j : j + (1 << 20)] for j in range(0, len(data), 1 << 20)]
            store.upload(None, 1 + rng.randrange(2**31), chunks, size_hint=size)
            done[i] += 1

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    nginx = [pid for node in nodes or [] for pid in node.pids()]
    start.wait()
    t0, cpu0, nginx0 = time.perf_counter(), time.process_time(), cpu_seconds(nginx)
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    cpu, nginx_cpu = time.process_time() - cpu0, cpu_seconds(nginx) - nginx0
    files = sum(done)
    result = {
        "threads": threads,
        "files": files,
        "seconds": round(elapsed, 2),
        "files_per_s": round(files / elapsed, 1),
        "mb_per_s": round(files * size / elapsed / 1e6, 1),
    }
    if nodes and files:
        result["loader_cpu_ms_per_file"] = round(cpu / files * 1000, 2)
        result["nginx_cpu_ms_per_file"] = round(nginx_cpu / files * 1000, 2)
    return result


def letter_rate(store: BlobStore, seconds: float, nodes: list[NginxNode]) -> dict[str, Any]:
    """Letters of ``LETTER`` small attachments, one letter after the other, the uploads of a
    letter started together on a pool of 16 threads as ``Mailbox`` delivery starts them: what
    a letter's attachments cost in time and CPU on a WebDAV pair."""
    count, size = LETTER
    pool = ThreadPoolExecutor(16)
    nginx = [pid for node in nodes for pid in node.pids()]
    letters = 0
    stop = time.monotonic() + seconds
    t0, cpu0, nginx0 = time.perf_counter(), time.process_time(), cpu_seconds(nginx)
    while time.monotonic() < stop:
        datas = [os.urandom(size) for _ in range(count)]
        uploads = [pool.submit(store.upload, None, 1, [d], size) for d in datas]
        for upload in uploads:
            upload.result()
        letters += 1
    elapsed = time.perf_counter() - t0
    cpu, nginx_cpu = time.process_time() - cpu0, cpu_seconds(nginx) - nginx0
    pool.shutdown()
    return {
        "attachments": count,
        "bytes_each": size,
        "letters": letters,
        "letters_per_s": round(letters / elapsed, 1),
        "ms_per_letter": round(elapsed / letters * 1000, 2),
        "loader_cpu_ms_per_letter": round(cpu / letters * 1000, 2),
        "nginx_cpu_ms_per_letter": round(nginx_cpu / letters * 1000, 2),
    }


def wrk_rate(
    url: str, size: int, connections: int, seconds: float, workdir: Path
) -> dict[str, Any]:
    script = workdir / f"put-{size}.lua"
    body = workdir / f"body-{size}"
    body.write_bytes(os.urandom(size))
    script.write_text(
        f'local f = io.open("{body}", "rb")\n'
        "wrk.method = 'PUT'\n"
        "wrk.body = f:read('*a')\n"
        "f:close()\n"
    )
    threads = min(connections, 2)
    out = subprocess.run(
        [
            *(WRK or "wrk", "-t", str(threads), "-c", str(connections)),
            *("-d", f"{seconds:.0f}s", "-s", str(script), url),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])  # type: ignore[index]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "connections": connections,
        "puts_per_s": round(rate, 1),
        "mb_per_s": round(rate * size / 1e6, 1),
        "non_2xx": int(non2xx[1]) if non2xx else 0,
    }


def client_rate(kind: str, url: str, size: int, seconds: float) -> dict[str, Any]:
    """PUTs, then streamed GETs (1 MiB reads) of the same files, from one thread."""
    body = os.urandom(size)
    rates: dict[str, Any] = {}
    for method in ("PUT", "GET"):
        n = 0
        stop = time.monotonic() + seconds / 2
        t0 = time.perf_counter()
        if kind == "urllib3":
            pool = urllib3.PoolManager(maxsize=4)
            while time.monotonic() < stop:
                target = f"{url}/c{n % 64 if method == 'PUT' else 0}"
                if method == "PUT":
                    assert pool.request("PUT", target, body=body).status in (201, 204)
                else:
                    r = pool.request("GET", target, preload_content=False)
                    assert sum(len(c) for c in r.stream(1 << 20)) == size
                    r.release_conn()
                n += 1
            pool.clear()
        else:
            with httpx.Client() as client:
                while time.monotonic() < stop:
                    target = f"{url}/c{n % 64 if method == 'PUT' else 0}"
                    if method == "PUT":
                        assert client.put(target, content=body).status_code in (201, 204)
                    else:
                        with client.stream("GET", target) as r:
                            assert sum(len(c) for c in r.iter_bytes(1 << 20)) == size
                    n += 1
        elapsed = time.perf_counter() - t0
        rates[f"{method.lower()}s_per_s"] = round(n / elapsed, 1)
        rates[f"{method.lower()}_mb_per_s"] = round(n * size / elapsed / 1e6, 1)
    return rates


def store_on(
    workdir: Path, name: str, disks: tuple[DiskSpec, DiskSpec], factory: DiskFactory | None = None
) -> BlobStore:
    where = workdir / name
    where.mkdir()
    store = BlobStore(
        SQLiteFileDB(where / "filedb.sqlite3"),
        SQLitePairDB(where / "pairdb.sqlite3"),
        disk_factory=factory or DiskFactory(),
    )
    store.add_pair(*disks)
    return store


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--dir", default=None, help="where the disks go (default: /tmp)")
    p.add_argument("--tls", action="store_true", help="HTTPS nodes with client certificates")
    args = p.parse_args()
    seconds = 2.0 if args.quick else 8.0
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-webdav-", dir=args.dir))
    result: dict[str, Any] = {
        "benchmark": "webdav_put",
        "machine": machine(workdir),
        "seconds_per_figure": seconds,
        "nginx": subprocess.run(
            ["nginx", "-v"], capture_output=True, text=True, check=False
        ).stderr.strip(),
        "tls": args.tls,
        "runs": [],
    }
    factory = DiskFactory()
    tls = [None, None]
    if args.tls:
        ca = TestCA.create(workdir / "ca")
        tls = [ca.issue(workdir / f"node-{i}-tls", ["127.0.0.1"]) for i in range(2)]
        mine = ca.issue(workdir / "loader-tls", ["loader"])
        factory = DiskFactory(tls=client_context(mine.ca, mine.cert, mine.key))
    nodes = [NginxNode.start(workdir / f"node-{i}", tls=tls[i]) for i in range(2)]
    try:
        specs = tuple(node.disk("d") for node in nodes)
        for node in nodes:
            write_report(node.served / "d")
        webdav = store_on(workdir, "webdav", (specs[0], specs[1]), factory)
        local_dirs = (workdir / "local-0", workdir / "local-1")
        local_specs = (DiskSpec("local", str(local_dirs[0])), DiskSpec("local", str(local_dirs[1])))
        local = store_on(workdir, "local", local_specs)
        note(f"letters of {LETTER[0]} x {LETTER[1]} B attachments onto the WebDAV pair")
        result["letters_webdav_pair"] = letter_rate(webdav, seconds, nodes)
        for label, size in SIZES.items():
            run: dict[str, Any] = {"size": label, "bytes": size}
            for name, store in (("pochta_webdav_pair", webdav), ("pochta_local_pair", local)):
                run[name] = []
                for threads in (1, 4):
                    note(f"{label}: {name}, {threads} thread(s)")
                    run[name].append(
                        loader_rate(
                            store, size, threads, seconds, nodes if store is webdav else None
                        )
                    )
                    for d in (nodes[0].served / "d", nodes[1].served / "d", *local_dirs):
                        shutil.rmtree(d / "ab", ignore_errors=True)
                        for sub in d.glob("[0-9a-f][0-9a-f]"):
                            shutil.rmtree(sub, ignore_errors=True)
            if args.tls:
                result["runs"].append(run)
                continue
            target = f"{nodes[0].url}/d/tmp/wrk.part"
            if WRK is not None:
                run["nginx_put_wrk"] = []
                for connections in (1, 4):
                    note(f"{label}: wrk, {connections} connection(s)")
                    run["nginx_put_wrk"].append(
                        wrk_rate(target, size, connections, seconds, workdir)
                    )
            else:
                run["nginx_put_wrk"] = "wrk is not installed (apt-get install wrk)"
            for kind in ("urllib3", "httpx"):
                note(f"{label}: {kind} straight to nginx")
                run[f"nginx_put_{kind}"] = client_rate(kind, f"{nodes[0].url}/d/tmp", size, seconds)
            pochta1 = run["pochta_webdav_pair"][0]["files_per_s"]
            if isinstance(run["nginx_put_wrk"], list):
                run["ratio_pochta_pair_to_nginx_put_1_connection"] = round(
                    pochta1 / run["nginx_put_wrk"][0]["puts_per_s"], 3
                )
                run["ratio_pochta_pair_to_nginx_put_4_connections"] = round(
                    run["pochta_webdav_pair"][1]["files_per_s"]
                    / run["nginx_put_wrk"][1]["puts_per_s"],
                    3,
                )
            result["runs"].append(run)
        webdav.close()
        local.close()
        emit(result)
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
