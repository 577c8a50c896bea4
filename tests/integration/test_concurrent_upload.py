"""Two loaders uploading the same content to different pairs at once: one owner, strays
cleaned. Real processes: two ``pochta serve`` on one data directory, each receiving the same
files over the blob API; then ``pochta valkyrie run --once`` and ``pochta blob get``.

How the race is forced (not left to timing): PUT /v1/blobs/{key} decides "upload or only
count" and places the file before it reads the body. Every body is held back by the test.
Loader A's requests are sent while pair 2 is the only writable pair, and the test waits until
A has opened its temporary files there; then pair 2 is locked and pair 3 unlocked, and loader
B's requests are sent (temporary files on pair 3). Neither loader has found a live record, so
both write full copies. Then all bodies are released at the same moment, both loaders stream,
fsync, rename and upsert concurrently.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.keys import blob_path, master_index
from pochta.cli import app as pochta_app
from tests.integration.conftest import Server, start_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILES = 4
SIZE = 3 << 20  # three chunks and a bit: the loaders stream for a while, side by side

runner = CliRunner()


def cli(data: Path, *args: str, expect: int | None = 0) -> str:
    """A ``pochta`` command, run in this process (the loaders are the processes that race; a
    fresh interpreter per command would only add seconds of imports). Its stdout."""
    result = runner.invoke(pochta_app, [*args, "--data", str(data)])
    assert "Traceback" not in result.output, result.output
    if expect is not None:
        assert result.exit_code == expect, (args, result.exit_code, result.output)
    return result.stdout


def cli_json(data: Path, *args: str, expect: int | None = 0) -> Any:
    return json.loads(cli(data, *args, "--json", expect=expect))


def valkyrie(data: Path, *args: str) -> dict[str, Any]:
    """One pass, acting at once on strays and orphans, unthrottled."""
    result: dict[str, Any] = cli_json(
        data,
        "valkyrie",
        "run",
        "--once",
        "--budget",
        "0",
        "--slave-delay",
        "0",
        "--orphan-min-age",
        "0",
        *args,
        expect=None,  # 1 when a pass met errors: the caller looks at them
    )
    return result


def uploads_in_flight(root: Path) -> list[Path]:
    """Temporary files of uploads (not the loader's probes) on one disk."""
    tmp = root / "tmp"
    if not tmp.is_dir():
        return []
    return [p for p in tmp.glob("*.part") if not p.name.startswith("probe-")]


def wait_for(what: str, check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def every_file(roots: list[Path]) -> dict[Path, list[str]]:
    return {
        root: sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        for root in roots
    }


def start_loaders(data: Path, logs: Path) -> tuple[Server, Server]:
    """Two ``pochta serve`` on one data directory, started side by side."""
    with ThreadPoolExecutor(2) as pool:
        starting = [pool.submit(start_server, data, logs / f"loader-{n}.log") for n in "ab"]
        wait(starting)
    started = [f.result() for f in starting if f.exception() is None]
    if len(started) < 2:
        for server in started:
            server.stop()
        raise next(e for f in starting if (e := f.exception()) is not None)
    return started[0], started[1]


class HeldUpload:
    """One PUT whose body waits for ``go``; the server has placed it once headers arrive."""

    def __init__(self, server: Server, key: str, magic: int, data: bytes, go: threading.Event):
        self.server, self.key, self.magic, self.data, self.go = server, key, magic, data, go
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _body(self) -> Iterator[bytes]:
        if not self.go.wait(60):
            raise TimeoutError("never released")
        for start in range(0, len(self.data), 256 << 10):
            yield self.data[start : start + (256 << 10)]

    def _run(self) -> None:
        try:
            self.response = httpx.put(
                f"{self.server.url}/v1/blobs/{self.key}",
                params={"magic": self.magic},
                content=self._body(),
                headers=self.server.auth,
                timeout=90,
            )
        except BaseException as exc:  # reported by result()
            self.error = exc

    def result(self) -> dict[str, Any]:
        self.thread.join(90)
        assert self.error is None, repr(self.error)
        assert self.response is not None
        assert self.response.status_code == 201, self.response.text
        body: dict[str, Any] = self.response.json()
        return body


def test_two_loaders_race_on_different_pairs_one_owner_strays_cleaned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("POCHTA_VALKYRIE__ENABLED", "false")  # the test runs Valkyrie itself
    base = tmp_path.resolve()  # as PairDB keeps the roots
    roots = {2: (base / "p2a", base / "p2b"), 3: (base / "p3a", base / "p3b")}
    cli(data, "init")
    for a, b in roots.values():
        cli(data, "pairs", "add", str(a), str(b))  # pair 1 is the default one
    pairs = {p["id"]: p for p in cli_json(data, "pairs", "list")}
    assert sorted(pairs) == [1, 2, 3]
    all_roots = [Path(d["root"]) for p in pairs.values() for d in p["disks"]]

    rng = random.Random(4)
    contents = [rng.randbytes(SIZE + 1000 * i) for i in range(FILES)]
    keys = [hashlib.sha256(c).hexdigest() for c in contents]
    magic_a = [rng.randrange(1, 2**32) for _ in keys]
    magic_b = [rng.randrange(1, 2**32) for _ in keys]

    # only pair 2 takes new files while loader A places its uploads
    cli(data, "pairs", "set-flags", "1", "locked")
    cli(data, "pairs", "set-flags", "3", "locked")
    loader_a, loader_b = start_loaders(data, tmp_path)
    go = threading.Event()
    held: list[HeldUpload] = []
    try:
        held += [
            HeldUpload(loader_a, k, m, c, go)
            for k, m, c in zip(keys, magic_a, contents, strict=True)
        ]
        for root in roots[2]:
            wait_for(f"A's uploads on {root}", lambda r=root: len(uploads_in_flight(r)) == FILES)
        # now only pair 3 does: loader B places the same files there
        cli(data, "pairs", "set-flags", "2", "locked")
        cli(data, "pairs", "set-flags", "3", "none")
        held += [
            HeldUpload(loader_b, k, m, c, go)
            for k, m, c in zip(keys, magic_b, contents, strict=True)
        ]
        for root in roots[3]:
            wait_for(f"B's uploads on {root}", lambda r=root: len(uploads_in_flight(r)) == FILES)
        assert all(len(uploads_in_flight(r)) == FILES for r in roots[2])  # A's, still held
        for key in keys:  # neither loader has stored anything yet
            cli(data, "blob", "stat", key, expect=3)

        go.set()  # both loaders stream, fsync, rename and upsert at once
        results = [h.result() for h in held]
    finally:
        go.set()
        for h in held:
            h.thread.join(30)
        exits = [loader_a.stop(), loader_b.stop()]
    assert exits == [0, 0]
    for cli_args in (("1", "none"), ("2", "none"), ("3", "none")):
        cli(data, "pairs", "set-flags", *cli_args)

    # both wrote full copies (A on pair 2, B on pair 3) and both counted
    for i, key in enumerate(keys):
        by_a, by_b = results[i], results[FILES + i]
        assert by_a["uploaded"] and by_b["uploaded"], (by_a, by_b)
        assert (by_a["key"], by_b["key"]) == (key, key)
        # one inserted the record, the other counted on it (its pair unchanged)
        assert sorted([by_a["counter"], by_b["counter"]]) == [1, 2], (by_a, by_b)
        assert by_a["pair"] == by_b["pair"]
    for root in [*roots[2], *roots[3]]:
        assert uploads_in_flight(root) == []
        for key in keys:
            assert (root / blob_path(key)).is_file()  # four full copies of every key

    # one live record per key, counter 2, magic of both references, on one pair
    owners: dict[str, int] = {}
    for i, key in enumerate(keys):
        record = cli_json(data, "blob", "stat", key)
        assert record["space"] == "live"
        assert record["counter"] == 2
        assert record["magic"] == (magic_a[i] + magic_b[i]) % 2**32
        assert record["pair"] in (2, 3)
        owners[key] = record["pair"]
    filedb = SQLiteFileDB(data / "filedb.sqlite3")
    try:
        assert all(filedb.get_deleted(k) is None for k in keys)
        assert sum(filedb.count_live(p) for p in pairs) == FILES
        assert {p: filedb.count_live(p) for p in (2, 3)} == {
            p: sum(1 for o in owners.values() if o == p) for p in (2, 3)
        }
    finally:
        filedb.close()

    def stray_pair(key: str) -> int:
        return 5 - owners[key]  # 2 <-> 3

    # A stray is removed only once its owner's copies are checked: with one owner copy of the
    # first key damaged, Valkyrie on the stray pair's disks alone keeps that stray.
    victim = keys[0]
    owner_copy = roots[owners[victim]][1 - master_index(victim)] / blob_path(victim)
    raw = bytearray(owner_copy.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    owner_copy.write_bytes(bytes(raw))
    for root in roots[stray_pair(victim)]:
        swept = valkyrie(data, "--disk", str(root))
        (disk,) = swept["disks"]
        assert disk["errors"] == 1, disk
        assert any(victim in p and "stray copy kept" in p for p in disk["problems"]), disk
        assert (root / blob_path(victim)).is_file()
        others = [k for k in keys if k != victim and stray_pair(k) == stray_pair(victim)]
        assert disk["strays"] == len(others)  # the other strays there went to quarantine

    # every disk: the owner's damaged copy is repaired from its sibling, then the last stray
    # goes too (a second pass when the stray pair is scanned before the owner)
    repaired = 0
    for _ in range(3):
        swept = valkyrie(data)
        repaired += sum(d["repaired"] for d in swept["disks"])
        if swept["errors"] == 0:
            break
    assert swept["errors"] == 0, swept
    assert repaired == 1
    assert valkyrie(data)["errors"] == 0  # and a pass after that finds nothing to do

    for key in keys:
        for pair_id, (a, b) in roots.items():
            for root in (a, b):
                path = root / blob_path(key)
                if pair_id == owners[key]:
                    assert hashlib.sha256(path.read_bytes()).hexdigest() == key
                else:
                    assert not path.exists()
                    quarantined = list(path.parent.glob(f"{key}.deleted.*"))
                    assert len(quarantined) == 1, quarantined

    # the quarantine period over: Valkyrie purges the strays; two files per key are left
    monkeypatch.setenv("POCHTA_VALKYRIE__QUARANTINE_SECONDS", "0")
    swept = valkyrie(data)
    assert swept["errors"] == 0, swept
    assert sum(d["purged"] for d in swept["disks"]) == FILES * 2
    files = every_file(all_roots)
    expected: dict[Path, list[str]] = {root: [] for root in all_roots}
    for key in keys:
        for root in roots[owners[key]]:
            expected[root].append(blob_path(key))
    assert files == {root: sorted(names) for root, names in expected.items()}

    # and reading through the store gives the content back, checked by size and CRC-32
    for key, content in zip(keys, contents, strict=True):
        out = tmp_path / f"{key}.out"
        got = cli_json(
            data,
            "blob",
            "get",
            key,
            "-o",
            str(out),
            "--size",
            str(len(content)),
            "--crc32",
            f"{zlib.crc32(content):08x}",
        )
        assert got["bytes"] == len(content)
        assert out.read_bytes() == content
