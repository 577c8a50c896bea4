"""One contract for every sender-list store (:class:`pochta.types.SenderLists`): in memory,
SQLite (a table of the mailbox database) and PostgreSQL, through the same assertions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pochta.errors import InvalidInput
from pochta.mailbox.index.sqlite import SQLiteIndex
from pochta.mailbox.lists.memory import MemorySenderLists
from pochta.mailbox.lists.postgres import PostgresSenderLists
from pochta.mailbox.lists.sqlite import SQLiteSenderLists
from pochta.types import ListEntry, SenderLists
from tests.contract.conftest import postgres

SENDER_LIST_KINDS = ["memory", "sqlite", "postgres"]


def open_lists(kind: str, where: Path, request: pytest.FixtureRequest) -> SenderLists:
    if kind == "memory":
        return MemorySenderLists()
    if kind == "sqlite":
        return SQLiteSenderLists(where / "mailbox.sqlite3")
    if kind == "postgres":
        return PostgresSenderLists(postgres(request))
    raise ValueError(kind)


@pytest.fixture(params=SENDER_LIST_KINDS)
def lists(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SenderLists]:
    store = open_lists(request.param, tmp_path, request)
    yield store
    store.close()


ALLOW = ListEntry("bob@shop.example", "allow")
BLOCK = ListEntry("spam.example", "block")


def test_a_new_store_has_no_entries(lists: SenderLists) -> None:
    assert lists.entries(1, 1000) == []
    assert lists.lookup([1, 2], ["bob@shop.example", "shop.example"]) == {}
    assert lists.remove(1, "shop.example") is False
    assert lists.forget(1) == 0


def test_add_then_read_by_value(lists: SenderLists) -> None:
    assert lists.add(1, BLOCK, 10) is True
    assert lists.add(1, ALLOW, 10) is True
    assert lists.entries(1, 10) == [ALLOW, BLOCK]  # by value
    assert lists.entries(1, 1) == [ALLOW]
    assert lists.entries(2, 10) == []


def test_the_same_value_again_changes_its_action(lists: SenderLists) -> None:
    assert lists.add(1, ALLOW, 10) is True
    assert lists.add(1, ListEntry(ALLOW.value, "block"), 10) is False
    assert lists.entries(1, 10) == [ListEntry(ALLOW.value, "block")]


def test_the_limit_holds_but_a_known_value_can_still_change(lists: SenderLists) -> None:
    for i in range(3):
        lists.add(7, ListEntry(f"s{i}.example", "block"), 3)
    with pytest.raises(InvalidInput, match="at most 3"):
        lists.add(7, ListEntry("s3.example", "block"), 3)
    assert lists.add(7, ListEntry("s1.example", "allow"), 3) is False  # a change, not a new one
    assert len(lists.entries(7, 100)) == 3
    lists.add(8, ListEntry("s3.example", "block"), 3)  # another account has its own room


def test_lookup_reads_every_account_at_once_and_only_the_values_asked(
    lists: SenderLists,
) -> None:
    lists.add(1, ALLOW, 10)
    lists.add(1, ListEntry("other.example", "block"), 10)
    lists.add(2, ListEntry("shop.example", "block"), 10)
    lists.add(3, ListEntry("unrelated.example", "allow"), 10)
    got = lists.lookup([1, 2, 3, 4, 1], ["bob@shop.example", "shop.example", "shop.example"])
    assert got == {1: [ALLOW], 2: [ListEntry("shop.example", "block")]}
    assert lists.lookup([], ["shop.example"]) == {}
    assert lists.lookup([1], []) == {}


def test_remove_and_forget_touch_one_account(lists: SenderLists) -> None:
    lists.add(1, ALLOW, 10)
    lists.add(1, BLOCK, 10)
    lists.add(2, ALLOW, 10)
    assert lists.remove(1, ALLOW.value) is True
    assert lists.remove(1, ALLOW.value) is False
    assert lists.entries(1, 10) == [BLOCK]
    assert lists.forget(1) == 1
    assert lists.entries(1, 10) == []
    assert lists.entries(2, 10) == [ALLOW]


def test_concurrent_adds_never_pass_the_limit(lists: SenderLists) -> None:
    limit, errors = 20, []

    def add(t: int) -> None:
        for i in range(10):
            try:
                lists.add(5, ListEntry(f"t{t}-{i}.example", "block"), limit)
            except InvalidInput:
                errors.append(1)

    threads = [threading.Thread(target=add, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(lists.entries(5, 1000)) == limit
    assert len(errors) == 40 - limit


VALUES = st.sampled_from(["a.example", "b.example", "x@a.example", "y@b.example", "c.example"])
OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "forget"]),
        st.integers(1, 3),
        VALUES,
        st.sampled_from(["allow", "block"]),
    ),
    max_size=30,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_any_sequence_agrees_with_a_plain_model(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    ops: list[tuple[str, int, str, str]],
) -> None:
    store = open_lists(kind, tmp_path_factory.mktemp("lists"), request)
    model: dict[int, dict[str, str]] = {}
    try:
        for op, user, value, action in ops:
            if op == "add":
                own = model.setdefault(user, {})
                if value not in own and len(own) >= 4:
                    with pytest.raises(InvalidInput):
                        store.add(user, ListEntry(value, action), 4)  # type: ignore[arg-type]
                    continue
                assert store.add(user, ListEntry(value, action), 4) is (value not in own)  # type: ignore[arg-type]
                own[value] = action
            elif op == "remove":
                assert store.remove(user, value) is (
                    model.get(user, {}).pop(value, None) is not None
                )
            else:
                assert store.forget(user) == len(model.pop(user, {}))
        for user in (1, 2, 3):
            want = sorted(model.get(user, {}).items())
            assert [(e.value, e.action) for e in store.entries(user, 100)] == want
    finally:
        store.close()


@pytest.fixture(params=SENDER_LIST_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_sqlite_lists_share_the_mailbox_databases_writer(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "mailbox.sqlite3")
    try:
        lists = SQLiteSenderLists(index.database)
        user = index.add_user("ann@example.org", "hash")
        lists.add(user.id, ALLOW, 10)
        lists.close()  # the index's database stays open
        assert index.user("ann@example.org") == user
        again = SQLiteSenderLists(index.database)  # the table is there already
        assert again.entries(user.id, 10) == [ALLOW]
    finally:
        index.close()
    reopened = SQLiteSenderLists(tmp_path / "mailbox.sqlite3")  # a database of its own
    try:
        assert reopened.entries(user.id, 10) == [ALLOW]
    finally:
        reopened.close()
