"""Issue 29.3: a letter's decision (counters, rules, model) and its counting happen in the
worker process that parsed it; the server keeps the recipients, storing and the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.mailtools import letter

from pochta.antispam.shingles.counters import unpack
from pochta.antispam.shingles.counters.buckets import parse_window
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.counters.sqlite import SQLiteStore
from pochta.app import Pochta, build
from pochta.config import load_settings
from pochta.types import Envelope

ENVELOPE = Envelope(ip="192.0.2.1", sender="s@example.net", recipients=("a@example.org",))


def served(tmp_path: Path, workers: int) -> Pochta:
    settings = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False, "hostname": "mx.pochta.test"},
        imap={"enabled": False},
        antispam={"workers": workers},
    )
    p = build(settings)
    p.start()
    return p


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    p = served(tmp_path, 1)
    yield p
    p.close()


def test_the_worker_decides_as_the_server_would_and_counts_after_storing(
    pochta: Pochta,
) -> None:
    user = pochta.mailbox.index.add_user("ivan@pochta.test", "x")
    raw = letter(text="Lunch on Friday? The usual place at noon.\n")
    copies = 3
    probabilities: list[float] = []
    for i in range(copies):
        prepared = asyncio.run(
            pochta.intake.prepare(raw, ENVELOPE, "helo", analyze=True, shingles=True)
        )
        assert prepared.verdict is not None and prepared.analysis is not None
        assert prepared.verdict.probability is not None
        assert "decision" in prepared.analysis.seconds  # the worker's CPU, for the metrics
        probabilities.append(prepared.verdict.probability)
        if i == 0:  # nothing counted yet: the server, deciding now, sees what the worker saw
            server = pochta.scanner.scan(raw, ENVELOPE, "helo")
            assert (server.label, server.probability) == (
                prepared.verdict.label,
                prepared.verdict.probability,
            )
        done = pochta.mailbox.deliver_prepared(prepared, [user])
        assert done.verdict is prepared.verdict and done.verdict.label == "ham"
    # the worker read its own counts: each copy looked more like the ham counted before it
    assert probabilities == sorted(probabilities, reverse=True) and len(set(probabilities)) > 1
    assert pochta.shingles.counters.stats().updates == 0  # the server counted nothing itself
    assert prepared.refs is not None  # the answer's shingles, once, as the counters take them
    refs = unpack(prepared.refs)
    pochta.intake.close()  # the worker counts what it was handed and writes its buffer
    # read from the store itself (the server's own read cache may still hold the zeros)
    fresh = Counters(SQLiteStore(pochta.settings.data_dir / "shingles.sqlite3"), cache_size=0)
    try:
        counts = fresh.query(refs, [parse_window("14d")])
    finally:
        fresh.close()
    hams = [c["14d"]["ham"] for c in counts]
    # every shingle counted ham; the plain ones once per copy (a unique pair counts once)
    assert hams and min(hams) >= 1 and max(hams) == copies, counts


def test_without_workers_the_server_decides_and_counts(tmp_path: Path) -> None:
    p = served(tmp_path, 0)
    try:
        user = p.mailbox.index.add_user("ivan@pochta.test", "x")
        prepared = asyncio.run(
            p.intake.prepare(letter(), ENVELOPE, "helo", analyze=True, shingles=True)
        )
        assert prepared.verdict is None and prepared.analysis is not None
        done = p.mailbox.deliver_prepared(prepared, [user])
        assert done.verdict is not None and done.verdict.label == "ham"
        assert p.shingles.counters.stats().updates > 0  # counted in the server's counters
    finally:
        p.close()


def test_a_worker_imports_what_it_runs_not_the_whole_application(pochta: Pochta) -> None:
    # its scanner is built by pochta.mailbox.deciding, not by pochta.app (which imports the
    # blob store, guard, the HTTP side: ~300 modules and ~25 MB more in every worker)
    pool = pochta.intake.pool
    assert pool is not None
    modules = ("pochta.app", "pochta.mailbox.deciding")
    loaded = f"[m for m in {modules!r} if m in __import__('sys').modules]"
    assert pool.run(eval, loaded) == ["pochta.mailbox.deciding"]
