"""The per-recipient step's grouping (:class:`pochta.mailbox.personal.Personal`), for any
lists: every recipient in exactly one group, with the verdict the rule gives them, and one
group per distinct stored result (label and header)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pochta.antispam import personal as rule
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.verdict import Verdict
from pochta.mailbox.lists import SenderListService
from pochta.mailbox.lists.memory import MemorySenderLists
from pochta.mailbox.personal import Personal
from pochta.types import ListEntry, User

VALUES = ["bob@shop.example", "shop.example", "news.shop.example", "other.example"]
LISTS = st.dictionaries(
    st.integers(1, 8),
    st.dictionaries(st.sampled_from(VALUES), st.sampled_from(["allow", "block"]), max_size=3),
    max_size=8,
)


@given(
    LISTS,
    st.sampled_from(["ham", "spam", "phishing"]),
    st.sampled_from(["bob@shop.example", "ann@news.shop.example", "x@elsewhere.example", ""]),
    st.lists(st.integers(1, 8), min_size=1, max_size=8, unique=True),
)
def test_every_recipient_is_in_one_group_with_their_own_verdict(
    lists: dict[int, dict[str, str]], label: str, sender: str, ids: list[int]
) -> None:
    store = MemorySenderLists()
    for user_id, entries in lists.items():
        for value, action in entries.items():
            store.add(user_id, ListEntry(value, "allow" if action == "allow" else "block"), 10)
    users = [User(i, f"u{i}@example.org", "") for i in ids]
    verdict = Verdict(label, None, 0.0, [], [], NO_AUTH, {})  # type: ignore[arg-type]
    groups = Personal(SenderListService(store)).groups(verdict, sender, users)
    assert sorted(u.id for _, members in groups for u in members) == sorted(ids)
    keys = [(v.label, v.header()) for v, _ in groups]
    assert len(set(keys)) == len(keys)  # one group per distinct stored result

    def own(user_id: int) -> list[ListEntry]:
        return [
            ListEntry(v, "allow" if a == "allow" else "block")
            for v, a in lists.get(user_id, {}).items()
        ]

    for mine, members in groups:
        for u in members:
            expected = rule.personal(verdict, own(u.id), sender)
            assert (expected.label, expected.header()) == (mine.label, mine.header())
    if not any(rule.match(own(u.id), sender) for u in users):
        assert groups == [(verdict, users)]  # nobody listed: today's one group, same verdict
