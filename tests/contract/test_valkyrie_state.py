"""The contract of Valkyrie's saved state (``StateStore``): every backend, one suite."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pochta.blobs.valkyrie import COUNT_NAMES, Counts, StateStore, ValkyrieState
from pochta.blobs.valkyrie.state.postgres import PostgresValkyrieState
from pochta.postgres.migrate import shipped
from tests.contract.conftest import postgres


@pytest.fixture(params=["sqlite", "postgres"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    store: StateStore
    if request.param == "sqlite":
        store = ValkyrieState(tmp_path / "valkyrie.sqlite3")
    else:
        store = PostgresValkyrieState(postgres(request))
    yield store
    store.close()


def test_a_disk_never_seen_starts_from_the_beginning(state: StateStore) -> None:
    assert state.position("/srv/a") == ""
    assert state.summary() == {**dict.fromkeys(COUNT_NAMES, 0), "disks": []}


def test_positions_are_per_disk_and_totals_add_up(state: StateStore) -> None:
    state.save("/srv/a", "ab/cd/x", Counts(checked=5, bytes=100), finished_at=None)
    state.save("/srv/b", "00/11/y", Counts(checked=1, errors=1), finished_at=None)
    state.save("/srv/a", "ef/01/z", Counts(checked=2, repaired=1, bytes=2**40), finished_at=None)
    assert state.position("/srv/a") == "ef/01/z"
    assert state.position("/srv/b") == "00/11/y"
    summary = state.summary()
    assert (summary["checked"], summary["repaired"], summary["errors"]) == (8, 1, 1)
    assert summary["bytes"] == 100 + 2**40
    a, b = summary["disks"]
    assert (a["disk"], a["position"], a["passes"], a["last_pass"]) == ("/srv/a", "ef/01/z", 0, None)
    assert (a["checked"], b["checked"]) == (7, 1)


def test_a_finished_pass_starts_over_and_is_counted(state: StateStore) -> None:
    state.save("/srv/a", "ab", Counts(checked=3), finished_at=None)
    state.save("/srv/a", "", Counts(checked=1), finished_at=1_700_000_000.5)
    assert state.position("/srv/a") == ""
    (disk,) = state.summary()["disks"]
    assert (disk["passes"], disk["last_pass"], disk["checked"]) == (1, 1_700_000_000.5, 4)
    state.save("/srv/a", "", Counts(), finished_at=1_700_000_100.0)
    (disk,) = state.summary()["disks"]
    assert (disk["passes"], disk["last_pass"]) == (2, 1_700_000_100.0)


def test_the_postgres_table_has_a_column_for_every_count() -> None:
    (sql,) = [m.sql for m in shipped() if m.name == "valkyrie"]
    columns = re.findall(r"^\s+(\w+) bigint NOT NULL DEFAULT 0", sql, re.M)
    assert columns == ["passes", *COUNT_NAMES]
