"""What the contract suites run in other threads and processes.

A spawned child imports this module by name, so it holds no fixtures and no pytest: only the
map from a backend kind to the code that opens it, and the workloads.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from pochta.blobs.filedb.postgres import PostgresFileDB
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.keys import MAGIC_MOD, random_magic
from pochta.types import FileDB, Key, Magic


def open_filedb(kind: str, location: str) -> FileDB:
    """Open a client of a shared FileDB in this process. Backends that several processes can
    share (SQLite, PostgreSQL; Tarantool later) are listed here. For PostgreSQL,
    ``location`` is the DSN of a migrated database."""
    if kind == "sqlite":
        return SQLiteFileDB(Path(location))
    if kind == "postgres":
        from pochta.postgres.database import PoolSettings, Postgres

        return PostgresFileDB(Postgres.connect(location, PoolSettings(min_size=1, max_size=4)))
    raise ValueError(f"FileDB kind {kind!r} cannot be opened from another process")


@dataclass
class Log:
    """What one worker did, so the caller can compute what the FileDB must now hold."""

    incs: list[tuple[Key, Magic]] = field(default_factory=list)
    decs: list[tuple[Key, Magic]] = field(default_factory=list)
    upserts: list[tuple[Key, Magic]] = field(default_factory=list)


def churn(db: FileDB, keys: list[Key], fresh: list[Key], seed: int, ops: int) -> Log:
    """Upsert every key of ``fresh`` (racing other workers to insert it), then ``ops`` random
    steps on ``keys``: inc with a new magic, or dec a magic this worker added earlier. Each
    key of ``keys`` must hold one reference nobody decs, so its counter never reaches 0."""
    rng = random.Random(seed)
    log = Log()
    for key in fresh:
        magic = random_magic(rng)
        db.upsert(key, magic, 1)
        log.upserts.append((key, magic))
    mine: list[tuple[Key, Magic]] = []
    for _ in range(ops):
        if mine and rng.random() < 0.4:
            ref = mine.pop(rng.randrange(len(mine)))
            db.dec(*ref)
            log.decs.append(ref)
        else:
            ref = (rng.choice(keys), random_magic(rng))
            db.inc(*ref)
            mine.append(ref)
            log.incs.append(ref)
    return log


def churn_in_process(
    kind: str,
    location: str,
    barrier: str,
    workers: int,
    keys: list[Key],
    fresh: list[Key],
    seed: int,
    ops: int,
) -> Log:
    """``churn`` in a child process, started together with its siblings: each announces
    itself in the ``barrier`` directory and waits until all have."""
    db = open_filedb(kind, location)
    try:
        Path(barrier, f"{seed}.ready").touch()
        deadline = time.monotonic() + 60
        while len(list(Path(barrier).iterdir())) < workers:
            if time.monotonic() > deadline:
                raise TimeoutError("the other workers did not start")
            time.sleep(0.005)
        return churn(db, keys, fresh, seed, ops)
    finally:
        db.close()


def expected(base: dict[Key, Magic], logs: list[Log]) -> dict[Key, tuple[int, Magic]]:
    """(counter, magic) of every key after the workers: ``base`` holds each shared key's
    untouched first reference."""
    state = {key: (1, magic) for key, magic in base.items()}
    for log in logs:
        for key, magic in log.upserts + log.incs:
            counter, total = state.get(key, (0, 0))
            state[key] = (counter + 1, (total + magic) % MAGIC_MOD)
        for key, magic in log.decs:
            counter, total = state[key]
            state[key] = (counter - 1, (total - magic) % MAGIC_MOD)
    return state
