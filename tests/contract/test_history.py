"""The HistoryStore contract: every history backend passes these same assertions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pochta.history import MemoryHistory, SQLiteHistory
from pochta.history.postgres import PostgresHistory
from pochta.types import AuditRecord, HistoryStore, StorageSample, Tally
from tests.contract.conftest import postgres

HISTORY_KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=HISTORY_KINDS)
def history(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryStore]:
    store: HistoryStore
    if request.param == "memory":
        store = MemoryHistory()
    elif request.param == "sqlite":
        store = SQLiteHistory(tmp_path / "history.sqlite3")
    elif request.param == "postgres":
        store = PostgresHistory(postgres(request))
    else:  # pragma: no cover - a new backend adds its branch here
        raise AssertionError(request.param)
    yield store
    store.close()


def sample(at: float, letters: int = 1) -> StorageSample:
    return StorageSample(at, letters, 100 * letters, 60 * letters, 110 * letters)


def test_samples_come_back_oldest_first_from_a_time(history: HistoryStore) -> None:
    for at in (30.0, 10.0, 20.0):
        history.add_sample(sample(at, int(at)))
    assert [s.at for s in history.samples(0)] == [10.0, 20.0, 30.0]
    assert history.samples(20.0) == [sample(20.0, 20), sample(30.0, 30)]
    assert [s.at for s in history.samples(0, limit=2)] == [20.0, 30.0]  # the newest two
    assert history.samples(31.0) == []


def test_tallies_add_up_per_hour_series_and_name(history: HistoryStore) -> None:
    history.add_tallies([Tally(5, "verdict", "spam", 2), Tally(5, "verdict", "ham", 1)])
    history.add_tallies([Tally(5, "verdict", "spam", 3), Tally(6, "verdict", "spam", 1)])
    history.add_tallies([Tally(5, "sign", "PHISH_URGENCY", 4)])
    history.add_tallies([])
    assert history.tallies("verdict", 0) == [
        Tally(5, "verdict", "ham", 1),
        Tally(5, "verdict", "spam", 5),
        Tally(6, "verdict", "spam", 1),
    ]
    assert history.tallies("verdict", 6) == [Tally(6, "verdict", "spam", 1)]
    assert history.tallies("verdict", 0, limit=1) == [Tally(5, "verdict", "ham", 1)]
    assert history.tallies("sign", 0) == [Tally(5, "sign", "PHISH_URGENCY", 4)]
    assert history.tallies("complaint", 0) == []


def test_top_sums_every_hour_and_puts_the_most_first(history: HistoryStore) -> None:
    history.add_tallies([Tally(1, "complaint", f"old {i:04d}", 2) for i in range(3000)])
    history.add_tallies([Tally(5, "complaint", "newest", 3), Tally(5, "complaint", "old 0007", 1)])
    history.add_tallies([Tally(6, "complaint", "newest", 4), Tally(6, "sign", "PHISH_URGENCY", 9)])
    assert history.top("complaint", 0, 3) == [("newest", 7), ("old 0007", 3), ("old 0000", 2)]
    assert history.top("complaint", 5, 10) == [("newest", 7), ("old 0007", 1)]
    assert history.top("complaint", 6, 10) == [("newest", 4)]
    assert len(history.top("complaint", 0, 5000)) == 3001
    assert history.top("complaint", 0, 0) == [] and history.top("complaint", 7, 5) == []
    assert history.top("sign", 0) == [("PHISH_URGENCY", 9)]


def test_names_are_kept_as_given(history: HistoryStore) -> None:
    odd = "8:00ff00ff00ff00ff:Ваш счёт заблокирован: 'срочно' \"%_\\"
    history.add_tallies([Tally(1, "complaint", odd, 1)])
    assert history.tallies("complaint", 0)[0].name == odd


def test_audits_newest_first(history: HistoryStore) -> None:
    first = AuditRecord(10.0, 100, 1, 50, 40, 9, 9, 1.5)
    second = AuditRecord(20.0, 7, 0, 3, 3, 1, 0, 0.1)
    history.add_audit(first)
    history.add_audit(second)
    assert history.audits() == [second, first]
    assert history.audits(limit=1) == [second]


def test_prune_forgets_old_samples_and_tallies_not_audits(history: HistoryStore) -> None:
    history.add_sample(sample(3600.0 * 2))
    history.add_sample(sample(3600.0 * 5))
    history.add_tallies([Tally(1, "verdict", "ham", 1), Tally(5, "verdict", "ham", 1)])
    history.add_audit(AuditRecord(1.0, 1, 0, 1, 0, 0, 0, 0.0))
    assert history.prune(3600.0 * 4) == 2
    assert [s.at for s in history.samples(0)] == [3600.0 * 5]
    assert [t.hour for t in history.tallies("verdict", 0)] == [5]
    assert len(history.audits()) == 1


def test_a_batch_repeating_a_cell_adds_it_up(history: HistoryStore) -> None:
    history.add_tallies([Tally(5, "verdict", "spam", 2), Tally(5, "verdict", "spam", 3)])
    assert history.tallies("verdict", 0) == [Tally(5, "verdict", "spam", 5)]


def test_an_odd_name_does_not_stop_its_batch(history: HistoryStore) -> None:
    """A shingle's value may hold a NUL (PostgreSQL's text cannot): the batch's other cells
    are still added, and the odd one is counted under some name."""
    history.add_tallies([Tally(1, "complaint", "a\x00b", 1), Tally(1, "complaint", "ok", 2)])
    got = history.tallies("complaint", 0)
    assert len(got) == 2 and sum(t.n for t in got) == 3
    assert Tally(1, "complaint", "ok", 2) in got


def test_tallies_of_two_writers_add_up(history: HistoryStore) -> None:
    """Two loaders' recorders each write the increments of one hour: the stored cell is their
    sum, however their batches interleave."""
    import threading

    def write(name: str) -> None:
        for _ in range(50):
            history.add_tallies([Tally(9, "verdict", "spam", 1), Tally(9, "verdict", name, 1)])

    threads = [threading.Thread(target=write, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert history.tallies("verdict", 9) == [
        Tally(9, "verdict", "a", 50),
        Tally(9, "verdict", "b", 50),
        Tally(9, "verdict", "spam", 100),
    ]
