"""The FileDB contract (seed 004): every backend, one suite.

Runs against each entry of ``FILEDB_KINDS`` in conftest.py; the cross-process test against each
entry of ``SHARED_FILEDB_KINDS``.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from pochta.blobs.keys import MAGIC_MOD, key_of, random_magic
from pochta.errors import BadKey, BadMagic, BlobNotFound, InvalidInput
from pochta.types import FileDB, FileFlag, FileRecord, Key, Magic, Space
from tests.contract import workers
from tests.contract.conftest import FakeClock, NewFileDB, SharedFileDB

K = key_of(b"the attachment of seed 004")
OTHER = key_of(b"another attachment")
TOP = MAGIC_MOD - 1  # the largest magic


def got(db: FileDB, key: Key) -> FileRecord:
    record = db.get(key)
    assert record is not None
    return record


def state(record: FileRecord | None) -> tuple[int, int, FileFlag, Space] | None:
    return None if record is None else (record.counter, record.magic, record.flags, record.space)


# -- the worked example of seed 004 -----------------------------------------------------------
def test_upsert_inserts_a_live_record(filedb: FileDB) -> None:
    record = filedb.upsert(K, 345, 7)
    assert record == FileRecord(K, 1, 345, FileFlag.NONE, 7, Space.LIVE, None)
    assert filedb.get(K) == record


def test_seed_example_balanced_deletes_move_the_record_to_space1(
    filedb: FileDB, clock: FakeClock
) -> None:
    filedb.upsert(K, 345, 7)
    assert state(filedb.inc(K, 123)) == (2, 468, FileFlag.NONE, Space.LIVE)
    assert state(filedb.dec(K, 345)) == (1, 123, FileFlag.NONE, Space.LIVE)
    clock.advance(60)
    moved = filedb.dec(K, 123)
    assert moved == FileRecord(K, 0, 0, FileFlag.NONE, 7, Space.DELETED, clock.now)
    assert filedb.get(K) == moved


def test_seed_example_a_repeated_dec_sets_do_not_delete(filedb: FileDB) -> None:
    """Counter 0 with magic 222: the second letter's dec came twice. Then the first letter goes
    too: magic -123. The file is flagged and stays live through all of it."""
    filedb.upsert(K, 345, 7)
    filedb.inc(K, 123)
    filedb.dec(K, 123)
    assert state(filedb.dec(K, 123)) == (0, 222, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert state(filedb.dec(K, 345)) == (-1, MAGIC_MOD - 123, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert state(filedb.get(K)) == (-1, MAGIC_MOD - 123, FileFlag.DO_NOT_DELETE, Space.LIVE)


def test_do_not_delete_is_sticky_even_when_the_sums_return_to_zero(filedb: FileDB) -> None:
    filedb.upsert(K, 345, 7)
    filedb.inc(K, 123)
    filedb.dec(K, 123)
    filedb.dec(K, 123)  # counter 0, magic 222: flagged
    assert state(filedb.inc(K, 123)) == (1, 345, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert state(filedb.dec(K, 345)) == (0, 0, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert got(filedb, K).space is Space.LIVE
    # and onwards: counter and magic may meet at zero again, it is never moved
    filedb.upsert(K, 5, 9)
    assert state(filedb.dec(K, 5)) == (0, 0, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert got(filedb, K).pair_id == 7


def test_counter_below_zero_is_flagged(filedb: FileDB) -> None:
    filedb.upsert(K, 10, 1)
    filedb.inc(K, 20)
    filedb.dec(K, 30)  # a wrong magic: counter 1, magic 0
    assert state(filedb.get(K)) == (1, 0, FileFlag.NONE, Space.LIVE)
    assert state(filedb.dec(K, 1)) == (0, TOP, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert state(filedb.dec(K, TOP)) == (-1, 0, FileFlag.DO_NOT_DELETE, Space.LIVE)


def test_dec_after_delete_brings_the_record_back_flagged(filedb: FileDB) -> None:
    """A dec for a record already in space1: a reference the store did not know about. The
    record returns to space0 with counter -1, magic -m and DO_NOT_DELETE (counting.py)."""
    filedb.upsert(K, 345, 7)
    assert filedb.dec(K, 345).space is Space.DELETED
    back = filedb.dec(K, 99)
    assert back == FileRecord(K, -1, MAGIC_MOD - 99, FileFlag.DO_NOT_DELETE, 7, Space.LIVE, None)
    assert filedb.get(K) == back
    # it is live again: inc works, and balancing it never moves it
    assert state(filedb.inc(K, 99)) == (0, 0, FileFlag.DO_NOT_DELETE, Space.LIVE)
    assert state(filedb.dec(K, 1)) == (-1, TOP, FileFlag.DO_NOT_DELETE, Space.LIVE)


# -- upsert, inc, get ---------------------------------------------------------------------------
def test_upsert_on_a_live_key_acts_as_inc_and_keeps_the_pair(filedb: FileDB) -> None:
    filedb.upsert(K, 345, 1)
    record = filedb.upsert(K, 123, 2)
    assert record == FileRecord(K, 2, 468, FileFlag.NONE, 1, Space.LIVE, None)
    assert filedb.get(K) == record


def test_upsert_keeps_a_do_not_delete_flag(filedb: FileDB) -> None:
    filedb.upsert(K, 1, 1)
    filedb.dec(K, 2)  # counter 0, magic -1: flagged
    assert state(filedb.upsert(K, 1, 2)) == (1, 0, FileFlag.DO_NOT_DELETE, Space.LIVE)


def test_upsert_after_the_move_inserts_a_new_live_record(filedb: FileDB, clock: FakeClock) -> None:
    filedb.upsert(K, 345, 1)
    filedb.dec(K, 345)
    again = filedb.upsert(K, 9, 3)
    assert again == FileRecord(K, 1, 9, FileFlag.NONE, 3, Space.LIVE, None)
    assert filedb.get(K) == again  # live wins over space1
    assert filedb.inc(K, 1).counter == 2
    filedb.dec(K, 1)
    clock.advance(3600)
    moved = filedb.dec(K, 9)
    assert moved == FileRecord(K, 0, 0, FileFlag.NONE, 3, Space.DELETED, clock.now)
    assert filedb.get(K) == moved


def test_inc_keeps_flags_and_pair(filedb: FileDB) -> None:
    filedb.upsert(K, 1, 4)
    filedb.dec(K, 1)
    filedb.dec(K, 7)  # dec after delete: flagged, live
    assert filedb.inc(K, 3) == FileRecord(
        K, 0, (3 - 7) % MAGIC_MOD, FileFlag.DO_NOT_DELETE, 4, Space.LIVE, None
    )


def test_inc_of_a_record_in_space1_is_not_found(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5)
    with pytest.raises(BlobNotFound):
        filedb.inc(K, 5)
    assert got(filedb, K).space is Space.DELETED


def test_unknown_key(filedb: FileDB) -> None:
    assert filedb.get(K) is None
    with pytest.raises(BlobNotFound):
        filedb.inc(K, 1)
    with pytest.raises(BlobNotFound):
        filedb.dec(K, 1)
    assert filedb.get(K) is None


def test_keys_are_independent(filedb: FileDB) -> None:
    filedb.upsert(K, 1, 1)
    filedb.upsert(OTHER, 2, 2)
    filedb.dec(K, 1)
    filedb.inc(OTHER, 3)
    assert got(filedb, K).space is Space.DELETED
    assert filedb.get(OTHER) == FileRecord(OTHER, 2, 5, FileFlag.NONE, 2)


# -- magic arithmetic ---------------------------------------------------------------------------
@pytest.mark.parametrize("magic", [1, 2**31 - 1, 2**31, 2**31 + 1, TOP])
def test_every_magic_round_trips(filedb: FileDB, magic: Magic) -> None:
    assert filedb.upsert(K, magic, 1).magic == magic
    assert got(filedb, K).magic == magic


def test_magic_wraps_around_mod_2_32(filedb: FileDB) -> None:
    filedb.upsert(K, TOP, 1)
    assert state(filedb.inc(K, 2)) == (2, 1, FileFlag.NONE, Space.LIVE)
    assert state(filedb.inc(K, 2**31)) == (3, 2**31 + 1, FileFlag.NONE, Space.LIVE)
    assert state(filedb.inc(K, 2**31)) == (4, 1, FileFlag.NONE, Space.LIVE)
    assert state(filedb.dec(K, 2**31)) == (3, 2**31 + 1, FileFlag.NONE, Space.LIVE)
    assert state(filedb.dec(K, 2**31)) == (2, 1, FileFlag.NONE, Space.LIVE)
    assert state(filedb.dec(K, TOP)) == (1, 2, FileFlag.NONE, Space.LIVE)
    assert state(filedb.get(K)) == (1, 2, FileFlag.NONE, Space.LIVE)
    assert filedb.dec(K, 2).space is Space.DELETED


def test_magics_summing_to_2_32_are_zero_but_the_counter_is_not(filedb: FileDB) -> None:
    filedb.upsert(K, 2**31, 1)
    assert state(filedb.inc(K, 2**31)) == (2, 0, FileFlag.NONE, Space.LIVE)
    assert state(filedb.dec(K, 2**31)) == (1, 2**31, FileFlag.NONE, Space.LIVE)


@pytest.mark.parametrize("magic", [0, -1, MAGIC_MOD, MAGIC_MOD + 5])
def test_magic_outside_1_to_2_32_is_refused(filedb: FileDB, magic: int) -> None:
    with pytest.raises(BadMagic):
        filedb.upsert(K, magic, 1)
    assert filedb.get(K) is None
    filedb.upsert(K, 5, 1)
    with pytest.raises(BadMagic):
        filedb.inc(K, magic)
    with pytest.raises(BadMagic):
        filedb.dec(K, magic)
    assert state(filedb.get(K)) == (1, 5, FileFlag.NONE, Space.LIVE)


@pytest.mark.parametrize("key", ["", "ab" * 31, K.upper(), K[:-1] + "g", K + "0"])
def test_malformed_key_is_refused(filedb: FileDB, key: str) -> None:
    with pytest.raises(BadKey):
        filedb.upsert(key, 1, 1)
    with pytest.raises(BadKey):
        filedb.inc(key, 1)
    with pytest.raises(BadKey):
        filedb.dec(key, 1)
    with pytest.raises(BadKey):
        filedb.get(key)


# -- concurrency --------------------------------------------------------------------------------
KEYS = [key_of(f"shared {i}".encode()) for i in range(3)]
FRESH = [key_of(f"fresh {i}".encode()) for i in range(4)]


def seed_base(db: FileDB, rng: random.Random) -> dict[Key, Magic]:
    """One reference per shared key that no worker decs, so no key is ever moved."""
    base = {key: random_magic(rng) for key in KEYS}
    for key, magic in base.items():
        db.upsert(key, magic, 1)
    return base


def assert_consistent(db: FileDB, want: dict[Key, tuple[int, Magic]]) -> None:
    assert set(want) == set(KEYS) | set(FRESH)
    for key, (counter, magic) in want.items():
        assert state(db.get(key)) == (counter, magic, FileFlag.NONE, Space.LIVE), key


@pytest.mark.usefixtures("busy_switching")
def test_threads_inc_and_dec_the_same_keys(filedb: FileDB) -> None:
    base = seed_base(filedb, random.Random(1))
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(workers.churn, filedb, KEYS, FRESH, seed, 150) for seed in range(8)]
        logs = [f.result() for f in futures]
    assert sum(len(log.incs) for log in logs) > sum(len(log.decs) for log in logs) > 0
    assert_consistent(filedb, workers.expected(base, logs))


@pytest.mark.usefixtures("busy_switching")
def test_threads_racing_to_upsert_one_key_insert_it_once(filedb: FileDB) -> None:
    start = threading.Barrier(8)

    def loader(i: int) -> FileRecord:
        start.wait()
        return filedb.upsert(K, i + 1, i + 1)

    with ThreadPoolExecutor(max_workers=8) as pool:
        records = list(pool.map(loader, range(8)))
    assert sorted(r.counter for r in records) == list(range(1, 9))
    first = next(r for r in records if r.counter == 1)
    assert state(filedb.get(K)) == (8, sum(range(1, 9)), FileFlag.NONE, Space.LIVE)
    assert got(filedb, K).pair_id == first.pair_id


@pytest.mark.usefixtures("busy_switching")
def test_threads_deleting_every_reference_move_the_record_exactly_once(filedb: FileDB) -> None:
    magics = [random_magic(random.Random(i)) for i in range(8)]
    filedb.upsert(K, magics[0], 1)
    for magic in magics[1:]:
        filedb.inc(K, magic)
    start = threading.Barrier(8)

    def deleter(magic: Magic) -> FileRecord:
        start.wait()
        return filedb.dec(K, magic)

    with ThreadPoolExecutor(max_workers=8) as pool:
        records = list(pool.map(deleter, magics))
    assert [r.space for r in records].count(Space.DELETED) == 1
    assert sorted(r.counter for r in records) == list(range(8))
    assert all(r.flags is FileFlag.NONE for r in records)
    assert state(filedb.get(K)) == (0, 0, FileFlag.NONE, Space.DELETED)


def test_processes_inc_and_dec_the_same_keys(shared_filedb: SharedFileDB, tmp_path: Path) -> None:
    db = workers.open_filedb(shared_filedb.kind, shared_filedb.location)
    try:
        base = seed_base(db, random.Random(2))
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        n = 3
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=spawn) as pool:
            futures = [
                pool.submit(
                    workers.churn_in_process,
                    shared_filedb.kind,
                    shared_filedb.location,
                    str(barrier),
                    n,
                    KEYS,
                    FRESH,
                    seed,
                    300,
                )
                for seed in range(n)
            ]
            logs = [f.result(timeout=120) for f in futures]
        assert_consistent(db, workers.expected(base, logs))
    finally:
        db.close()


# -- a model, and random sequences ------------------------------------------------------------
@dataclass
class Modelled:
    counter: int
    magic: Magic
    flags: FileFlag
    pair_id: int
    space: Space = Space.LIVE
    moved_at: float | None = None

    def record(self, key: Key) -> FileRecord:
        return FileRecord(
            key, self.counter, self.magic, self.flags, self.pair_id, self.space, self.moved_at
        )


MODEL_KEYS = [key_of(bytes([i])) for i in range(3)]
MAGICS = st.one_of(
    st.sampled_from([1, 2, 123, 345, 2**31, TOP]), st.integers(min_value=1, max_value=TOP)
)


class FileDBMachine(RuleBasedStateMachine):
    """Random sequences of upsert / inc / dec / get against a model written out plainly here
    (not with pochta.blobs.counting, which the backends themselves use)."""

    refs = Bundle("refs")
    journaled = Bundle("journaled")

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.db = self.make_db()
        self.live: dict[Key, Modelled] = {}
        self.deleted: dict[Key, Modelled] = {}

    def make_db(self) -> FileDB:
        raise NotImplementedError

    def now(self) -> float:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        self.db.close()

    @rule(target=refs, key=st.sampled_from(MODEL_KEYS), magic=MAGICS, pair=st.integers(1, 3))
    def upsert(self, key: Key, magic: Magic, pair: int) -> tuple[Key, Magic]:
        m = self.live.get(key)
        if m is None:
            m = self.live[key] = Modelled(1, magic, FileFlag.NONE, pair)
        else:
            m.counter += 1
            m.magic = (m.magic + magic) % MAGIC_MOD
        assert self.db.upsert(key, magic, pair) == m.record(key)
        return key, magic

    @rule(target=refs, key=st.sampled_from(MODEL_KEYS), magic=MAGICS)
    def inc(self, key: Key, magic: Magic) -> object:
        m = self.live.get(key)
        if m is None:
            with pytest.raises(BlobNotFound):
                self.db.inc(key, magic)
            return multiple()
        m.counter += 1
        m.magic = (m.magic + magic) % MAGIC_MOD
        assert self.db.inc(key, magic) == m.record(key)
        return key, magic

    def check_dec(self, key: Key, magic: Magic) -> None:
        m = self.live.get(key)
        if m is None and key in self.deleted:  # dec after delete
            event("dec after delete")
            gone = self.deleted.pop(key)
            m = self.live[key] = Modelled(
                -1, (-magic) % MAGIC_MOD, FileFlag.DO_NOT_DELETE, gone.pair_id
            )
        elif m is None:
            with pytest.raises(BlobNotFound):
                self.db.dec(key, magic)
            return
        else:
            m.counter -= 1
            m.magic = (m.magic - magic) % MAGIC_MOD
            if m.counter < 0 or (m.counter == 0 and m.magic != 0):
                event("flagged")
                m.flags |= FileFlag.DO_NOT_DELETE
            if m.counter == 0 and m.magic == 0 and not m.flags:
                event("moved to space1")
                del self.live[key]
                m = self.deleted[key] = Modelled(
                    0, 0, FileFlag.NONE, m.pair_id, Space.DELETED, self.now()
                )
        assert self.db.dec(key, magic) == m.record(key)

    @rule(ref=consumes(refs))
    def dec_own(self, ref: tuple[Key, Magic]) -> None:
        """A letter deleted once, with its own magic."""
        self.check_dec(*ref)

    @rule(key=st.sampled_from(MODEL_KEYS), magic=MAGICS)
    def dec_any(self, key: Key, magic: Magic) -> None:
        """A repeated or foreign dec."""
        self.check_dec(key, magic)

    @rule(target=journaled, key=st.sampled_from(MODEL_KEYS), magic=MAGICS)
    def inc_journaled(self, key: Key, magic: Magic) -> object:
        """A count with an operation id; it can be replayed later."""
        self.ops += 1
        op = f"op-{self.ops}".encode()
        m = self.live.get(key)
        if m is None:
            with pytest.raises(BlobNotFound):
                self.db.inc(key, magic, op)
            return multiple()
        m.counter += 1
        m.magic = (m.magic + magic) % MAGIC_MOD
        assert self.db.inc(key, magic, op) == m.record(key)
        return key, magic, op

    @rule(done=journaled)
    def replay(self, done: tuple[Key, Magic, bytes]) -> None:
        """The same count again (a crash, a retry): nothing changes, whatever came between."""
        key, magic, op = done
        event("replayed")
        m = self.live.get(key) or self.deleted.get(key)
        if m is None:
            with pytest.raises(BlobNotFound):
                self.db.inc(key, magic, op)
        else:
            assert self.db.inc(key, magic, op) == m.record(key)
            assert self.db.dec(key, magic, op) == m.record(key)  # an id names one step

    @rule(seconds=st.floats(min_value=0.5, max_value=1e6))
    def tick(self, seconds: float) -> None:
        self.advance(seconds)

    @invariant()
    def get_agrees(self) -> None:
        for key in MODEL_KEYS:
            m = self.live.get(key) or self.deleted.get(key)
            assert self.db.get(key) == (None if m is None else m.record(key))


def test_random_sequences_agree_with_the_model(new_filedb: NewFileDB, clock: FakeClock) -> None:
    class Machine(FileDBMachine):
        def make_db(self) -> FileDB:
            return new_filedb()

        def now(self) -> float:
            return clock.now

        def advance(self, seconds: float) -> None:
            clock.advance(seconds)

    run_state_machine_as_test(  # type: ignore[no-untyped-call]
        Machine,
        settings=settings(
            max_examples=60,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# -- for Valkyrie, evacuation and restore -----------------------------------------------------
def test_get_deleted_sees_space1_even_after_a_re_upload(filedb: FileDB, clock: FakeClock) -> None:
    assert filedb.get_deleted(K) is None
    filedb.upsert(K, 5, 1)
    assert filedb.get_deleted(K) is None
    filedb.dec(K, 5)
    moved = filedb.get_deleted(K)
    assert moved == FileRecord(K, 0, 0, FileFlag.NONE, 1, Space.DELETED, clock.now)
    filedb.upsert(K, 9, 2)  # uploaded again: a live record beside the stale space1 one
    assert got(filedb, K).space is Space.LIVE
    assert filedb.get_deleted(K) == moved


def test_forget_deleted_only_drops_the_record_moved_at_that_time(
    filedb: FileDB, clock: FakeClock
) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5)
    first = clock.now
    assert not filedb.forget_deleted(K, first + 1)  # another move: left alone
    assert filedb.get_deleted(K) is not None
    assert filedb.forget_deleted(K, first)
    assert filedb.get_deleted(K) is None
    assert filedb.get(K) is None
    assert not filedb.forget_deleted(K, first)  # already gone
    assert not filedb.forget_deleted(OTHER, first)  # never there


def test_forget_deleted_leaves_a_live_record_alone(filedb: FileDB, clock: FakeClock) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5)
    filedb.upsert(K, 7, 1)
    assert filedb.forget_deleted(K, clock.now)
    assert state(filedb.get(K)) == (1, 7, FileFlag.NONE, Space.LIVE)


def test_repoint_is_a_compare_and_set_on_the_pair(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1)
    filedb.inc(K, 6)
    assert not filedb.repoint(K, 2, 3)  # not on pair 2
    assert got(filedb, K).pair_id == 1
    assert filedb.repoint(K, 1, 3)
    assert got(filedb, K) == FileRecord(K, 2, 11, FileFlag.NONE, 3)
    assert not filedb.repoint(K, 1, 4)  # moved already
    assert not filedb.repoint(OTHER, 1, 3)  # no record


def test_repoint_never_touches_a_space1_record(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5)
    assert not filedb.repoint(K, 1, 2)
    assert got(filedb, K).space is Space.DELETED
    assert got(filedb, K).pair_id == 1


def test_live_keys_and_count_live_of_a_pair(filedb: FileDB) -> None:
    keys = sorted(key_of(bytes([i])) for i in range(7))
    for i, key in enumerate(keys):
        filedb.upsert(key, 1 + i, 1 if i % 2 == 0 else 2)
    on_1 = [k for i, k in enumerate(keys) if i % 2 == 0]
    assert filedb.live_keys(1) == on_1
    assert filedb.count_live(1) == 4
    assert filedb.count_live(2) == 3
    assert filedb.count_live(9) == 0
    assert filedb.live_keys(1, limit=2) == on_1[:2]
    assert filedb.live_keys(1, after=on_1[1], limit=10) == on_1[2:]
    assert filedb.live_keys(1, after=on_1[-1]) == []
    filedb.dec(on_1[0], 1)  # to space1: no longer live
    assert filedb.live_keys(1) == on_1[1:]
    assert filedb.count_live(1) == 3


def test_revive_recreates_a_flagged_live_record(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5)
    revived = filedb.revive(K, 4)
    assert revived == FileRecord(K, 0, 0, FileFlag.DO_NOT_DELETE, 4)
    assert got(filedb, K) == revived
    assert filedb.get_deleted(K) is None
    assert filedb.revive(OTHER, 2) == FileRecord(OTHER, 0, 0, FileFlag.DO_NOT_DELETE, 2)


def test_revive_keeps_a_live_record_and_drops_space1(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5)
    live = filedb.upsert(K, 7, 2)
    assert filedb.revive(K, 3) == live
    assert filedb.get_deleted(K) is None
    assert got(filedb, K) == live


# -- the journal of exactly-once counts ---------------------------------------------------------
OP1, OP2, OP3 = b"c-op-1", b"c-op-2", b"d-op-3"


def test_an_op_is_applied_once_whatever_the_replays(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1, op=OP1)
    assert state(filedb.upsert(K, 5, 1, op=OP1)) == (1, 5, FileFlag.NONE, Space.LIVE)
    filedb.inc(K, 7, op=OP2)
    filedb.inc(K, 7, op=OP2)
    assert state(got(filedb, K)) == (2, 12, FileFlag.NONE, Space.LIVE)
    filedb.dec(K, 7, op=OP3)
    assert state(filedb.dec(K, 7, op=OP3)) == (1, 5, FileFlag.NONE, Space.LIVE)
    assert filedb.applied([OP1, OP2, OP3, b"never"]) == {OP1, OP2, OP3}


def test_a_replayed_dec_after_the_move_to_space1_changes_nothing(
    filedb: FileDB, clock: FakeClock
) -> None:
    filedb.upsert(K, 5, 1, op=OP1)
    moved = filedb.dec(K, 5, op=OP3)
    assert moved.space is Space.DELETED
    clock.now += 10
    again = filedb.dec(K, 5, op=OP3)  # without the journal: back to space0, DO_NOT_DELETE
    assert (again.space, again.moved_at, again.flags) == (Space.DELETED, moved.moved_at, 0)
    assert filedb.get_deleted(K) is not None


def test_a_replayed_op_on_a_forgotten_record_is_not_found(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1)
    filedb.dec(K, 5, op=OP3)
    deleted = filedb.get_deleted(K)
    assert deleted is not None and deleted.moved_at is not None
    assert filedb.forget_deleted(K, deleted.moved_at)
    with pytest.raises(BlobNotFound):
        filedb.dec(K, 5, op=OP3)


def test_a_failed_step_journals_nothing(filedb: FileDB) -> None:
    with pytest.raises(BlobNotFound):
        filedb.inc(K, 5, op=OP2)  # no live record
    assert filedb.applied([OP2]) == set()
    filedb.upsert(K, 9, 1)
    filedb.inc(K, 5, op=OP2)  # the same id, now it can happen: it does, once
    assert got(filedb, K).counter == 2


# K's neighbour: on K's shard however a sharded FileDB of up to 4 shards cuts the keys (both
# begin above 0xc00), for the contract of op ids holds per shard (blobs/filedb/sharded.py)
NEIGHBOUR = key_of(b"another attachment 1")


def test_ops_are_per_operation_not_per_key(filedb: FileDB) -> None:
    filedb.upsert(K, 5, 1, op=OP1)
    filedb.upsert(NEIGHBOUR, 5, 1, op=OP2)
    filedb.inc(NEIGHBOUR, 6, op=OP1)  # OP1 is journaled: an id names one operation, reused = replay
    assert got(filedb, NEIGHBOUR).counter == 1


def test_forget_ops_and_the_journal_in_pages(filedb: FileDB) -> None:
    ops = [bytes([i]) * 4 for i in range(1, 8)]
    for i, op in enumerate(ops):
        filedb.upsert(K, i + 1, 1, op=op)
    assert filedb.journal() == ops
    assert filedb.journal(after=ops[2], limit=2) == ops[3:5]
    filedb.forget_ops([ops[0], ops[3], b"unknown"])
    assert filedb.journal() == [ops[1], ops[2], ops[4], ops[5], ops[6]]
    assert filedb.applied(ops) == set(filedb.journal())
    filedb.forget_ops([])
    assert got(filedb, K).counter == 7  # forgetting touches only the journal


@pytest.mark.parametrize("op", [b"", b"x" * 33])
def test_an_operation_id_is_1_to_32_bytes(filedb: FileDB, op: bytes) -> None:
    with pytest.raises(InvalidInput):
        filedb.upsert(K, 5, 1, op=op)
    assert filedb.get(K) is None


def test_threads_replaying_the_same_ops_count_each_once(filedb: FileDB) -> None:
    filedb.upsert(K, 1, 1)
    ops = [f"op-{i}".encode() for i in range(40)]

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for op in rng.sample(ops, len(ops)):
            filedb.inc(K, 3, op=op)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))
    assert (got(filedb, K).counter, got(filedb, K).magic) == (41, 1 + 3 * 40)
