"""One contract for every learned-words store (:mod:`pochta.antispam.words`): in-memory,
SQLite and PostgreSQL, through the ``WordStore`` protocol and through the ``Words`` service in
front of it."""

from __future__ import annotations

import itertools
import logging
import random
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam import tokens
from pochta.antispam.words import Words, WordStore
from pochta.antispam.words.memory import MemoryWordStore
from pochta.antispam.words.postgres import PostgresWordStore
from pochta.antispam.words.redis import RedisWordStore
from pochta.antispam.words.sqlite import SQLiteWordStore
from pochta.errors import StorageError
from pochta.postgres.database import Postgres
from tests.contract.conftest import postgres

WORD_STORE_KINDS = ["memory", "sqlite", "postgres", "redis", "redis-cluster"]
SERVER_KINDS = ["sqlite", "postgres", "redis"]  # compared with the memory model
EDGES = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]  # hashes at the signed/unsigned seams


def open_store(kind: str, where: Path, request: pytest.FixtureRequest) -> WordStore:
    if kind == "memory":
        return MemoryWordStore()
    if kind == "sqlite":
        return SQLiteWordStore(where / "words.sqlite3")
    if kind == "postgres":
        return PostgresWordStore(postgres(request))
    if kind in ("redis", "redis-cluster"):  # a prefix of its own: a property test's example
        fixture = "redis_client" if kind == "redis" else "redis_cluster_client"
        client = request.getfixturevalue(fixture)
        return RedisWordStore(client, prefix=f"lw{next(_SERIAL)}")
    raise ValueError(kind)


_SERIAL = itertools.count()


@pytest.fixture(params=WORD_STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WordStore]:
    s = open_store(request.param, tmp_path, request)
    yield s
    s.close()


def test_a_new_store_knows_nothing(store: WordStore) -> None:
    assert store.counts(0, [1, 2, 3]) == {}
    assert store.totals(0) == (0, 0)
    assert store.size(0) == 0


def test_add_then_read_every_hash_at_the_seams(store: WordStore) -> None:
    store.add(0, {h: (1, 2) for h in EDGES}, (1, 2), day=100)
    store.add(0, {EDGES[0]: (3, 0), 42: (0, 1)}, (3, 1), day=101)
    got = store.counts(0, [*EDGES, 42, 43])
    assert got == {**{h: (1, 2) for h in EDGES}, EDGES[0]: (4, 2), 42: (0, 1)}
    assert store.totals(0) == (4, 3)
    assert store.size(0) == len(EDGES) + 1


def test_negative_deltas_stop_at_zero(store: WordStore) -> None:
    store.add(0, {7: (2, 2)}, (2, 2), day=1)
    store.add(0, {7: (-5, -1), 8: (-1, 3)}, (-5, 0), day=2)
    assert store.counts(0, [7, 8]) == {7: (0, 1), 8: (0, 3)}
    assert store.totals(0) == (0, 2)


def test_counts_saturate_instead_of_overflowing(store: WordStore) -> None:
    top = (1 << 63) - 1
    store.add(0, {9: (top, 0)}, (top, 0), day=1)
    store.add(0, {9: (5, 1)}, (5, 1), day=1)
    assert store.counts(0, [9]) == {9: (top, 1)}
    assert store.totals(0) == (top, 1)


def test_prune_drops_the_words_seen_longest_ago(store: WordStore) -> None:
    store.add(0, {1: (1, 0), 2: (1, 0)}, (1, 0), day=10)
    store.add(0, {3: (0, 1), 4: (0, 1)}, (0, 1), day=20)
    store.add(0, {1: (1, 0)}, (1, 0), day=30)  # word 1 seen again: now the newest
    assert store.prune(0, keep=2) == 2
    assert set(store.counts(0, [1, 2, 3, 4])) == {1, 4}  # ties on the day: the lower hash goes
    assert store.size(0) == 2
    assert store.prune(0, keep=5) == 0
    assert store.totals(0) == (2, 1)  # letters learned are not forgotten with their words


def test_many_words_in_one_read(store: WordStore) -> None:
    words = {h * 7919: (h % 3, 1) for h in range(1, 1500)}
    store.add(0, words, (10, 10), day=1)
    got = store.counts(0, list(words))
    assert got == words


@pytest.mark.parametrize("kind", SERVER_KINDS)
@settings(max_examples=25, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([0, 7]),
            st.dictionaries(
                st.sampled_from([*EDGES, 5, 6]),
                st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
                max_size=5,
            ),
            st.tuples(st.integers(-2, 4), st.integers(-2, 4)),
            st.integers(1, 3),
        ),
        max_size=8,
    ),
    keep=st.integers(0, 7),
)
def test_any_sequence_of_adds_reads_as_the_memory_model(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, dict[int, tuple[int, int]], tuple[int, int], int]],
    keep: int,
) -> None:
    stores = [MemoryWordStore(), open_store(kind, tmp_path_factory.mktemp("w"), request)]
    try:
        for owner, words, letters, day in steps:
            for s in stores:
                s.add(owner, words, letters, day=day)
        keys = [*EDGES, 5, 6]
        model, store = stores
        assert store.owners() == model.owners()
        for owner in (0, 7):
            assert store.counts(owner, keys) == model.counts(owner, keys)
            assert store.totals(owner) == model.totals(owner)
            assert store.size(owner) == model.size(owner)
        # the same words go, ties on the day broken by the hash as an unsigned number
        assert store.prune(0, keep) == model.prune(0, keep)
        assert store.counts(0, keys) == model.counts(0, keys)
    finally:
        for s in stores:
            s.close()


# -- the service in front ----------------------------------------------------------------


def test_words_reads_what_is_buffered_and_what_is_stored(store: WordStore) -> None:
    words = Words(store, buffered=True)
    assert words.learn([1, 2], "spam")
    assert words.learn([2, 3], "ham", weight=3)
    before = words.table(["a", "b", "c"], [1, 2, 3])
    assert dict(before.counts) == {"a": (1, 0), "b": (1, 3), "c": (0, 3)}
    assert (before.spam_letters, before.ham_letters) == (1, 3)
    words.flush()
    after = words.table(["a", "b", "c"], [1, 2, 3])
    assert after == before
    assert store.counts(0, [1, 2, 3]) == {1: (1, 0), 2: (1, 3), 3: (0, 3)}
    words.close()


class Failing(MemoryWordStore):
    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def add(
        self, owner: int, words: Mapping[int, tuple[int, int]], letters: tuple[int, int], day: int
    ) -> None:
        if self.down:
            raise StorageError("down")
        super().add(owner, words, letters, day)


def test_a_failed_flush_keeps_the_words_to_retry() -> None:
    store = Failing()
    words = Words(store)
    words.learn([1], "spam")
    with pytest.raises(StorageError):
        words.flush()
    words.learn([1, 2], "ham")
    assert words.stats().failures == 1
    assert dict(words.table(["x", "y"], [1, 2]).counts) == {"x": (1, 1), "y": (0, 1)}
    store.down = False
    words.flush()
    assert store.counts(0, [1, 2]) == {1: (1, 1), 2: (0, 1)}
    assert store.totals(0) == (1, 1)


def test_a_full_buffer_drops_a_letter_rather_than_growing() -> None:
    words = Words(MemoryWordStore(), max_pending=10)
    assert words.learn(range(8), "ham")
    assert not words.learn(range(100, 105), "spam")  # 8 + 5 > 10
    assert words.stats().dropped == 1
    assert words.stats().pending == 8


def test_the_table_stays_within_max_words() -> None:
    store = MemoryWordStore()
    words = Words(store, buffered=False, max_words=1000, prune_interval=0)
    for i in range(5):
        words.learn(range(i * 600, i * 600 + 600), "ham")
    assert store.size(0) <= 1000 + 600  # pruned at each flush once past the limit
    words.prune()
    assert store.size(0) == 1000


class Slow(MemoryWordStore):
    """Writes, then waits: a reader comes between the store's commit and the flush's end."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()
        self.go_on = threading.Event()

    def add(
        self, owner: int, words: Mapping[int, tuple[int, int]], letters: tuple[int, int], day: int
    ) -> None:
        super().add(owner, words, letters, day)
        self.written.set()
        self.go_on.wait(10)


def test_a_read_during_a_flush_counts_each_learned_letter_once() -> None:
    """Found in review: a read between the store's commit and the flush clearing its batch
    counted that batch twice."""
    store = Slow()
    words = Words(store)
    words.learn([1, 2], "spam", weight=2)
    flusher = threading.Thread(target=words.flush)
    flusher.start()
    assert store.written.wait(10)
    got: list[tokens.TokenTable] = []
    reader = threading.Thread(target=lambda: got.append(words.table(["a", "b"], [1, 2])))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive()  # it waits for the flush to end rather than count it twice
    store.go_on.set()
    flusher.join(10)
    reader.join(10)
    assert dict(got[0].counts) == {"a": (2, 0), "b": (2, 0)}
    assert (got[0].spam_letters, got[0].ham_letters) == (2, 0)


# -- owners: the installation's table and each account's -----------------------------------


def test_each_owner_has_its_own_table(store: WordStore) -> None:
    store.add(0, {1: (1, 0), 2: (0, 1)}, (1, 1), day=5)
    store.add(7, {1: (0, 4)}, (0, 4), day=5)
    store.add(8, {3: (2, 0)}, (2, 0), day=5)
    assert store.counts(0, [1, 2, 3]) == {1: (1, 0), 2: (0, 1)}
    assert store.counts(7, [1, 2, 3]) == {1: (0, 4)}
    assert store.counts(8, [1, 2, 3]) == {3: (2, 0)}
    assert (store.totals(0), store.totals(7), store.totals(8), store.totals(9)) == (
        (1, 1), (0, 4), (2, 0), (0, 0),
    )  # fmt: skip
    assert (store.size(0), store.size(7), store.size(9)) == (2, 1, 0)
    assert store.owners() == [0, 7, 8]


def test_all_totals_are_every_owners_totals_in_one_read(store: WordStore) -> None:
    assert store.all_totals() == {}
    store.add(0, {1: (1, 0), 2: (0, 1)}, (1, 1), day=5)
    for owner in range(7, 7 + 30):  # on several slots: a Cluster's nodes each answer theirs
        store.add(owner, {1: (owner, 0)}, (owner, 3), day=5)
    store.add(8, {3: (-100, 0)}, (-100, 0), day=5)  # totals stop at 0, as totals() does
    want = {0: (1, 1), **{o: (o, 3) for o in range(7, 37)}, 8: (0, 3)}
    assert store.all_totals() == want
    assert {o: store.totals(o) for o in store.owners()} == want
    store.forget(9)
    assert 9 not in store.all_totals() and len(store.all_totals()) == 30


def test_forget_drops_one_owner_only(store: WordStore) -> None:
    store.add(0, {1: (1, 0)}, (1, 0), day=5)
    store.add(7, {1: (0, 4), 2: (1, 1)}, (1, 4), day=5)
    store.forget(7)
    assert store.counts(7, [1, 2]) == {}
    assert store.totals(7) == (0, 0)
    assert store.size(7) == 0
    assert store.owners() == [0]
    assert store.counts(0, [1]) == {1: (1, 0)}
    store.forget(7)  # twice: nothing to do
    store.add(7, {2: (1, 0)}, (1, 0), day=6)  # an owner learns again after being forgotten
    assert store.counts(7, [1, 2]) == {2: (1, 0)}


def test_prune_keeps_to_one_owner(store: WordStore) -> None:
    store.add(7, {1: (1, 0), 2: (1, 0), 3: (1, 0)}, (1, 0), day=10)
    store.add(8, {1: (1, 0), 2: (1, 0)}, (1, 0), day=1)
    assert store.prune(7, keep=1) == 2
    assert store.size(7) == 1
    assert store.size(8) == 2  # older, but another owner's


def test_a_file_of_the_single_table_layout_becomes_owner_0(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "words.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE words (hash INTEGER PRIMARY KEY, spam INTEGER NOT NULL,"
        " ham INTEGER NOT NULL, day INTEGER NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 0), spam INTEGER NOT NULL,"
        " ham INTEGER NOT NULL);"
        "INSERT INTO words VALUES (-5, 2, 1, 100), (9, 0, 3, 101);"
        "INSERT INTO totals VALUES (0, 4, 6);"
    )
    conn.commit()
    conn.close()
    store = SQLiteWordStore(path)
    assert store.counts(0, [(1 << 64) - 5, 9]) == {(1 << 64) - 5: (2, 1), 9: (0, 3)}
    assert store.totals(0) == (4, 6)
    store.close()
    again = SQLiteWordStore(path)  # opened again: nothing moved twice
    assert again.totals(0) == (4, 6)
    assert again.size(0) == 2
    again.close()


def test_words_learn_per_owner_and_read_buffered_and_stored(store: WordStore) -> None:
    words = Words(store, buffered=True)
    words.learn([1, 2], "spam")  # the installation
    words.learn([2], "ham", weight=3, owner=7)
    assert words.learned(7, [1, 2]) == ({2: (0, 3)}, (0, 3))
    assert words.learned(0, [1, 2]) == ({1: (1, 0), 2: (1, 0)}, (1, 0))
    words.flush()
    assert words.learned(7, [1, 2]) == ({2: (0, 3)}, (0, 3))
    assert store.counts(7, [1, 2]) == {2: (0, 3)}
    assert words.stats(7).learned_ham == 3
    words.learn([3], "spam", owner=7)
    words.forget(7)  # buffered and stored, both gone
    assert words.learned(7, [1, 2, 3]) == ({}, (0, 0))
    words.flush()
    assert store.owners() == [0]
    with pytest.raises(ValueError, match="cleared"):
        words.forget(0)
    words.clear()
    assert words.learned(0, [1, 2]) == ({}, (0, 0))
    words.close()


def test_each_account_stays_within_max_words_per_owner() -> None:
    store = MemoryWordStore()
    words = Words(store, buffered=False, max_words=10_000, max_words_per_owner=50)
    words.learn(range(200), "spam", owner=7)
    words.learn(range(300), "ham")
    words.prune()
    assert store.size(7) == 50
    assert store.size(0) == 300


# -- several loaders on one shared store ---------------------------------------------------


def open_twice(kind: str, where: Path, request: pytest.FixtureRequest) -> list[WordStore]:
    """Two stores on one table, as two loaders of an installation open it."""
    if kind == "postgres":
        db = postgres(request)
        return [PostgresWordStore(db), PostgresWordStore(Postgres.connect(db.dsn))]
    if kind == "redis":
        server = request.getfixturevalue("redis_server")
        request.getfixturevalue("redis_client")  # emptied
        return [RedisWordStore(server.client()), RedisWordStore(server.client())]
    return [open_store(kind, where, request), open_store(kind, where, request)]


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_concurrent_adds_from_two_loaders_neither_deadlock_nor_lose_counts(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each loader adds letters whose words overlap the other's, in its own order: every
    upsert takes its rows in the order of the hashes, so no add waits for the other in a
    circle (the server would roll one back and ``Postgres.transaction`` retry it: none is)."""
    stores = open_twice(kind, tmp_path, request)
    words = [(h * 0x9E3779B97F4A7C15) % (1 << 64) for h in range(1, 301)]
    errors: list[BaseException] = []

    def loader(i: int) -> None:
        rng = random.Random(i)
        try:
            for _ in range(40):
                letter = rng.sample(words, 200)
                stores[i].add(0, {h: (1, 0) for h in letter}, (1, 0), day=3)
        except BaseException as exc:  # the test reports it
            errors.append(exc)

    caplog.set_level(logging.DEBUG, logger="pochta.postgres")
    threads = [threading.Thread(target=loader, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert errors == []
        assert not [r for r in caplog.records if "retrying" in r.getMessage()]
        got = stores[1].counts(0, words)
        assert sum(s for s, _ in got.values()) == 2 * 40 * 200
        assert stores[0].totals(0) == (80, 0)
    finally:
        for s in stores:
            s.close()


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_two_loaders_words_give_the_same_table_after_both_flush(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two ``Words`` services on one store (two loaders): what either learned, both read."""
    a, b = (Words(s, buffered=True) for s in open_twice(kind, tmp_path, request))
    a.learn([1, 2, 3], "spam")
    b.learn([3, 4], "ham", weight=3)
    a.learn([5], "ham", owner=7)
    b.learn([5, 6], "spam", owner=7)
    assert a.learned(0, [1, 2, 3, 4]) != b.learned(0, [1, 2, 3, 4])  # not yet: buffered
    a.flush()
    b.flush()
    tokens_ = ["a", "b", "c", "d"]
    assert a.table(tokens_, [1, 2, 3, 4]) == b.table(tokens_, [1, 2, 3, 4])
    assert dict(a.table(tokens_, [1, 2, 3, 4]).counts) == {
        "a": (1, 0), "b": (1, 0), "c": (1, 3), "d": (0, 3),
    }  # fmt: skip
    assert a.learned(7, [5, 6]) == b.learned(7, [5, 6]) == ({5: (1, 1), 6: (1, 0)}, (1, 1))
    a.close()
    b.close()
