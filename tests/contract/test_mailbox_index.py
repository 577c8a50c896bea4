"""The MailIndex contract: every index backend passes these same assertions."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pochta.errors import AlreadyExists, FolderNotFound, InvalidInput
from pochta.mailbox.index.postgres import PostgresIndex
from pochta.mailbox.index.sqlite import SQLiteIndex
from pochta.postgres.database import PoolSettings, Postgres
from pochta.types import (
    AttachmentRef,
    FolderEntry,
    LetterFlag,
    LetterMeta,
    LetterState,
    MailIndex,
    NewStoredLetter,
)

KEY_A = hashlib.sha256(b"a").hexdigest()
KEY_B = hashlib.sha256(b"b").hexdigest()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgres"])
def index(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[MailIndex]:
    idx: MailIndex
    if request.param == "sqlite":
        idx = SQLiteIndex(tmp_path / "mailbox.sqlite3", clock=clock)
    elif request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        idx = PostgresIndex(Postgres.connect(dsn, PoolSettings(max_size=4)), clock=clock)
    else:  # pragma: no cover - a new backend adds its branch here
        raise AssertionError(request.param)
    yield idx
    idx.close()


def meta(subject: str = "hello", size: int = 100) -> LetterMeta:
    return LetterMeta(size=size, received=1.0, date=2.0, sender="a@x.test", subject=subject)


def refs(*magics: int) -> tuple[AttachmentRef, ...]:
    keys = [KEY_A, KEY_B]
    return tuple(AttachmentRef(n, keys[n % 2], 10 + n, 1234 + n, m) for n, m in enumerate(magics))


def deliver(idx: MailIndex, user_id: int, subject: str = "hello", *magics: int) -> int:
    (letter_id,) = idx.begin_delivery(
        b"skeleton", meta(subject), [NewStoredLetter(user_id, "Inbox", refs(*magics))]
    )
    idx.finish_delivery([letter_id])
    return letter_id


def test_users_get_inbox_and_spam_and_unique_emails(index: MailIndex) -> None:
    user = index.add_user("Alice@Example.ORG", "hash-a")
    assert user.email == "alice@example.org"
    assert [f.name for f in index.folders(user.id)] == ["Inbox", "Spam"]
    assert index.user("ALICE@example.org") == user
    assert index.user_by_id(user.id) == user
    assert index.user("nobody@example.org") is None
    with pytest.raises(AlreadyExists):
        index.add_user("alice@example.org", "other")
    with pytest.raises(InvalidInput):
        index.add_user("not an address", "h")
    assert [u.email for u in index.users()] == ["alice@example.org"]


def test_sessions_expire_and_reset_drops_them(index: MailIndex, clock: FakeClock) -> None:
    user = index.add_user("bob@example.org", "h")
    index.add_session(b"t" * 32, user.id, clock.now + 10)
    assert index.session_user(b"t" * 32, clock.now) == user.id
    assert index.session_user(b"t" * 32, clock.now + 11) is None
    assert index.session_user(b"x" * 32, clock.now) is None
    assert index.require_reset(["bob@example.org", "ghost@example.org"]) == 1
    assert index.session_user(b"t" * 32, clock.now) is None
    assert index.user("bob@example.org").reset_required  # type: ignore[union-attr]
    index.set_password(user.id, "new")
    again = index.user("bob@example.org")
    assert again is not None and not again.reset_required and again.password_hash == "new"


def test_a_delivery_is_invisible_until_finished(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    b = index.add_user("b@example.org", "h")
    ids = index.begin_delivery(
        b"skel",
        meta(),
        [NewStoredLetter(a.id, "Inbox", refs(5, 6)), NewStoredLetter(b.id, "Inbox", refs(7, 8))],
    )
    assert len(ids) == 2
    assert index.letters(a.id, "Inbox", 10) == []
    assert index.letter(a.id, ids[0]) is None
    index.finish_delivery(ids)
    assert [m.id for m in index.letters(a.id, "Inbox", 10)] == [ids[0]]
    skeleton, got = index.content(ids[1])
    assert skeleton == b"skel"
    assert [(r.n, r.key, r.magic) for r in got] == [(0, KEY_A, 7), (1, KEY_B, 8)]
    assert index.stats().skeleton_bytes == 4  # one skeleton for both recipients


def test_a_delivery_with_nothing_to_count_is_written_delivered(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    ids = index.begin_delivery(
        b"skel", meta(), [NewStoredLetter(a.id, "Inbox", ())], delivered=True
    )
    assert [m.id for m in index.letters(a.id, "Inbox", 10)] == ids
    assert index.pending() == []
    assert index.finish_delivery(ids) == 0  # nothing left to finish


def test_a_queue_entry_is_recorded_with_the_delivery_that_makes_its_letters_delivered(
    index: MailIndex, clock: FakeClock
) -> None:
    a = index.add_user("a@example.org", "h")
    at_once = index.begin_delivery(
        b"s", meta(), [NewStoredLetter(a.id, "Inbox", ())], delivered=True, queued="q1"
    )
    assert at_once and index.was_queued("q1")
    with pytest.raises(InvalidInput):  # a PENDING delivery records nothing yet
        index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", ())], queued="q2")
    ids = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(1))])
    assert not index.was_queued("q2")
    assert index.finish_delivery(ids, queued="q2") == 1
    assert index.was_queued("q2")
    # a delivery cut short (its letters abandoned) is not recorded: the entry is delivered again
    cut = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(2))])
    index.abandon(cut, [])
    assert index.finish_delivery(cut, queued="q3") == 0
    assert not index.was_queued("q3")
    clock.now += 100
    index.begin_delivery(
        b"s", meta(), [NewStoredLetter(a.id, "Inbox", ())], delivered=True, queued="q4"
    )
    assert index.forget_queued(clock.now - 50) == 2  # q1, q2
    assert not index.was_queued("q1") and index.was_queued("q4")


def test_no_one_reaches_another_users_letter(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    b = index.add_user("b@example.org", "h")
    letter_id = deliver(index, a.id)
    assert index.letter(b.id, letter_id) is None
    assert index.update(b.id, letter_id, seen=True) is None
    assert not index.delete(b.id, letter_id)
    assert index.letter(a.id, letter_id) is not None


def test_skeletons_read_a_batch_of_the_users_delivered_letters(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    b = index.add_user("b@example.org", "h")
    mine = []
    for size in (3, 10, 30):
        (letter_id,) = index.begin_delivery(
            b"s" * size, meta(f"{size}"), [NewStoredLetter(a.id, "Inbox", ())], delivered=True
        )
        mine.append(letter_id)
    (pending,) = index.begin_delivery(b"p", meta(), [NewStoredLetter(a.id, "Inbox", refs(1))])
    theirs = deliver(index, b.id)
    deleted = deliver(index, a.id)
    assert index.delete(a.id, deleted)
    asked = [*mine, pending, theirs, deleted, 10**9, mine[0]]
    got = index.skeletons(a.id, asked)
    assert sorted(got) == mine
    for letter_id in mine:
        letter, skeleton = got[letter_id]
        assert letter == index.letter(a.id, letter_id)
        assert skeleton == index.content(letter_id)[0]
    # a skeleton over max_size is left unread, its letter still given
    capped = index.skeletons(a.id, mine, max_size=10)
    assert {i: s for i, (_, s) in capped.items()} == {
        mine[0]: b"sss",
        mine[1]: b"s" * 10,
        mine[2]: None,
    }
    assert capped[mine[2]][0].subject == "30"
    assert index.skeletons(a.id, []) == {}
    assert index.skeletons(b.id, mine) == {}


def test_skeletons_take_any_number_of_ids(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    ids = [deliver(index, a.id, f"s{i}") for i in range(3)]
    asked = [*range(10**9, 10**9 + 1500), *ids]
    assert sorted(index.skeletons(a.id, asked)) == ids


def test_listing_pages_newest_first(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    ids = [deliver(index, a.id, f"s{i}") for i in range(5)]
    first = index.letters(a.id, "Inbox", 2)
    assert [m.id for m in first] == [ids[4], ids[3]]
    second = index.letters(a.id, "Inbox", 2, before=first[-1].id)
    assert [m.id for m in second] == [ids[2], ids[1]]
    assert [m.id for m in index.letters(a.id, "Inbox", 10, before=ids[1])] == [ids[0]]
    with pytest.raises(FolderNotFound):
        index.letters(a.id, "Nope", 10)


def test_flags_and_folders(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    letter_id = deliver(index, a.id)
    updated = index.update(a.id, letter_id, seen=True, flagged=True)
    assert updated is not None and updated.after.seen and updated.after.flagged
    assert not updated.before.seen and not updated.before.flagged
    moved = index.update(a.id, letter_id, folder="Spam")
    assert moved is not None and moved.after.folder == "Spam"
    assert moved.before.folder == "Inbox" and moved.before.seen
    assert index.letters(a.id, "Inbox", 10) == []
    counts = {f.name: (f.total, f.unseen) for f in index.folders(a.id)}
    assert counts == {"Inbox": (0, 0), "Spam": (1, 0)}
    with pytest.raises(FolderNotFound):
        index.update(a.id, letter_id, folder="Archive")
    index.add_folder(a.id, "Archive")
    with pytest.raises(AlreadyExists):
        index.add_folder(a.id, "Archive")
    assert index.update(a.id, letter_id, folder="Archive") is not None


def test_concurrent_moves_see_one_another(index: MailIndex) -> None:
    """Each update says what the letter was just before it, in the same atomic step: of
    several concurrent moves into Spam (a double click), exactly one sees it in the Inbox."""
    a = index.add_user("a@example.org", "h")
    letter_id = deliver(index, a.id)
    barrier = threading.Barrier(6)

    def move() -> str:
        barrier.wait()
        got = index.update(a.id, letter_id, folder="Spam")
        assert got is not None
        return got.before.folder

    with ThreadPoolExecutor(6) as pool:
        befores = list(pool.map(lambda _: move(), range(6)))
    assert sorted(befores) == ["Inbox"] + ["Spam"] * 5


def test_deletion_is_recorded_then_finished_ref_by_ref(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    letter_id = deliver(index, a.id, "x", 11, 22)
    assert index.delete(a.id, letter_id)
    assert not index.delete(a.id, letter_id)  # already being deleted
    assert index.letter(a.id, letter_id) is None
    ((got_id, pending),) = index.deletions(10)
    assert got_id == letter_id and [r.magic for r in pending] == [11, 22]
    states = {(lid, st) for lid, st, _ in index.all_refs()}
    assert states == {(letter_id, LetterState.DELETING)}
    index.ref_done(letter_id, 0)
    assert [r.n for r in index.deletions(10)[0][1]] == [1]
    index.ref_done(letter_id, 1)
    index.finish_deletion(letter_id)
    assert index.deletions(10) == []
    assert list(index.all_refs()) == []
    assert index.stats().skeleton_bytes == 0


def test_abandon_drops_uncounted_refs_and_turns_pending_letters_into_deletions(
    index: MailIndex,
) -> None:
    a = index.add_user("a@example.org", "h")
    cut = index.begin_delivery(
        b"s",
        meta(),
        [NewStoredLetter(a.id, "Inbox", refs(3, 4)), NewStoredLetter(a.id, "Inbox", refs(5))],
    )
    done = deliver(index, a.id, "x", 6)
    pending = index.pending()
    assert [(lid, [r.magic for r in rs]) for lid, rs in pending] == [
        (cut[0], [3, 4]),
        (cut[1], [5]),
    ]
    assert index.pending([cut[1], done]) == [pending[1]]
    assert index.pending(before=1.0) == []  # received at 1.0: not before it
    assert index.pending(cut, before=1.5) == pending
    # counted: the first letter's reference 0; never counted: its reference 1, the second's 0
    assert index.abandon([*cut, done], [(cut[0], 1), (cut[1], 0), (done, 0)]) == 2
    assert index.pending() == []
    work = {lid: [r.magic for r in rs] for lid, rs in index.deletions(10)}
    assert work == {cut[0]: [3], cut[1]: []}
    _, kept = index.content(done)  # a DELIVERED letter's references are never dropped
    assert [r.magic for r in kept] == [6]
    assert index.abandon(cut, []) == 0  # no longer PENDING
    assert index.finish_delivery(cut) == 0  # an abandoned delivery cannot be finished


def test_finish_delivery_says_how_many_letters_it_finished(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    ids = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(3))] * 3)
    assert index.finish_delivery(ids) == 3
    assert index.finish_delivery(ids) == 0


def test_ref_states(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    (cut,) = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(3))])
    done = deliver(index, a.id, "x", 6, 7)
    assert index.ref_states([(cut, 0), (done, 1), (done, 5), (999, 0)]) == {
        (cut, 0): LetterState.PENDING,
        (done, 1): LetterState.DELIVERED,
    }
    index.delete(a.id, done)
    index.ref_done(done, 1)
    assert index.ref_states([(done, 0), (done, 1)]) == {(done, 0): LetterState.DELETING}


def test_a_delivery_into_a_missing_folder_writes_nothing(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    with pytest.raises(FolderNotFound):
        index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Nope", ())])
    assert index.stats().skeleton_bytes == 0  # nothing half-written
    assert index.pending() == []


def test_stats_count_distinct_attachments_once(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    deliver(index, a.id, "1", 1, 2)
    deliver(index, a.id, "2", 3)
    s = index.stats()
    assert (s.users, s.letters, s.refs, s.blobs) == (1, 2, 3, 2)
    assert s.blob_bytes == 10 + 11
    assert s.logical_bytes == 200


def test_magic_round_trips_all_32_bits(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    letter_id = deliver(index, a.id, "m", 2**32 - 1, 2**31)
    _, got = index.content(letter_id)
    assert [r.magic for r in got] == [2**32 - 1, 2**31]


def test_admin_role_is_granted_and_revoked(index: MailIndex) -> None:
    plain = index.add_user("plain@example.org", "h")
    boss = index.add_user("boss@example.org", "h", admin=True)
    assert not plain.admin and boss.admin
    assert index.user("boss@example.org") == boss
    assert index.set_admin(plain.id, True)
    assert index.user_by_id(plain.id).admin  # type: ignore[union-attr]
    assert index.set_admin(boss.id, False)
    assert not index.user("boss@example.org").admin  # type: ignore[union-attr]
    assert {u.email: u.admin for u in index.users()} == {
        "boss@example.org": False,
        "plain@example.org": True,
    }
    assert not index.set_admin(10_000, True)  # no such user
    index.set_password(plain.id, "new")  # other changes keep the role
    assert index.user_by_id(plain.id).admin  # type: ignore[union-attr]


# -- IMAP: UIDs, UIDVALIDITY and flags ----------------------------------------------------


def folder_state(index: MailIndex, user_id: int, name: str) -> tuple[int, int]:
    (folder,) = [f for f in index.folders(user_id) if f.name == name]
    return folder.uidvalidity, folder.uidnext


def test_uids_ascend_per_folder_and_are_never_given_twice(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    b = index.add_user("b@example.org", "h")
    validity, uidnext = folder_state(index, a.id, "Inbox")
    assert validity > 0 and uidnext == 1
    first = deliver(index, a.id, "1")
    deliver(index, b.id, "b")  # another user's folder has its own UIDs
    second = deliver(index, a.id, "2")
    assert [(e.uid, e.letter_id) for e in index.entries(a.id, "Inbox")] == [(1, first), (2, second)]
    assert [e.uid for e in index.entries(b.id, "Inbox")] == [1]
    # a move gives the next UID of the folder it enters; UIDs are not reused after it
    moved = index.update(a.id, first, folder="Spam")
    assert moved is not None and moved.after.uid == 1 and moved.after.folder == "Spam"
    assert index.update(a.id, first, folder="Inbox") is not None
    assert [(e.uid, e.letter_id) for e in index.entries(a.id, "Inbox")] == [(2, second), (3, first)]
    assert index.update(a.id, first, folder="Inbox") is not None  # no move: same UID
    assert index.letter(a.id, first).uid == 3  # type: ignore[union-attr]
    index.delete(a.id, second)
    third = deliver(index, a.id, "3")
    assert [(e.uid, e.letter_id) for e in index.entries(a.id, "Inbox")] == [(3, first), (4, third)]
    assert folder_state(index, a.id, "Inbox") == (validity, 5)
    assert folder_state(index, a.id, "Spam")[1] == 2
    # a delivery cut short takes a UID too, and nobody gets it again
    (cut,) = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(3))])
    index.abandon([cut], [(cut, 0)])
    fourth = deliver(index, a.id, "4")
    assert index.entries(a.id, "Inbox")[-1] == FolderEntry(6, fourth, LetterFlag.NONE)
    with pytest.raises(FolderNotFound):
        index.entries(a.id, "Nope")


def test_a_new_folder_starts_its_own_uids(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    folder = index.add_folder(a.id, "Archive")
    assert folder.uidvalidity > 0 and folder.uidnext == 1
    assert folder_state(index, a.id, "Archive") == (folder.uidvalidity, 1)
    assert index.entries(a.id, "Archive") == []


def test_pending_letters_are_not_listed(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    ids = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(3))])
    assert index.entries(a.id, "Inbox") == []
    index.finish_delivery(ids)
    assert [e.letter_id for e in index.entries(a.id, "Inbox")] == ids


def test_set_flags_adds_and_removes_every_flag(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    b = index.add_user("b@example.org", "h")
    one, two = deliver(index, a.id, "1"), deliver(index, a.id, "2")
    others = deliver(index, b.id, "b")
    every = LetterFlag.SEEN | LetterFlag.FLAGGED | LetterFlag.ANSWERED | LetterFlag.DELETED
    every |= LetterFlag.DRAFT
    got = index.set_flags(a.id, [two, others, one], every, LetterFlag.NONE)
    assert got == [
        (LetterFlag.NONE, FolderEntry(2, two, every)),
        (LetterFlag.NONE, FolderEntry(1, one, every)),
    ]
    letter = index.letter(a.id, one)
    assert letter is not None and letter.seen and letter.flagged and letter.flags == every
    got = index.set_flags(a.id, [one], LetterFlag.NONE, LetterFlag.SEEN | LetterFlag.DELETED)
    assert got == [(every, FolderEntry(1, one, every & ~(LetterFlag.SEEN | LetterFlag.DELETED)))]
    assert index.letter(a.id, one).seen is False  # type: ignore[union-attr]
    assert index.folders(a.id)[0].unseen == 1
    assert index.entries(b.id, "Inbox") == [FolderEntry(1, others, LetterFlag.NONE)]
    # update() and set_flags() see the same flags
    index.update(a.id, one, seen=True, flagged=False)
    assert index.entries(a.id, "Inbox")[0].flags == (
        LetterFlag.SEEN | LetterFlag.ANSWERED | LetterFlag.DRAFT
    )
    index.delete(a.id, two)
    assert index.set_flags(a.id, [two], LetterFlag.SEEN, LetterFlag.NONE) == []


def test_a_letter_is_written_with_the_flags_it_is_given(index: MailIndex) -> None:
    a = index.add_user("a@example.org", "h")
    flags = LetterFlag.SEEN | LetterFlag.DRAFT
    ids = index.begin_delivery(
        b"s", meta(), [NewStoredLetter(a.id, "Inbox", (), flags=flags)], delivered=True
    )
    assert index.entries(a.id, "Inbox") == [FolderEntry(1, ids[0], flags)]
    letter = index.letter(a.id, ids[0])
    assert letter is not None and letter.seen and not letter.flagged and letter.uid == 1


def test_the_feedback_flags_are_kept(index: MailIndex) -> None:
    """$Junk / $NotJunk and pochta's own flags of the feedback rule round-trip, and setting
    one says whether it was set before (the rule's once-per-direction)."""
    a = index.add_user("a@example.org", "h")
    one = deliver(index, a.id, "1")
    mine = LetterFlag.JUNK | LetterFlag.NOT_JUNK | LetterFlag.COMPLAINED | LetterFlag.UNSPAMMED
    mine |= LetterFlag.SAID_SPAM
    assert index.set_flags(a.id, [one], LetterFlag.COMPLAINED, LetterFlag.NONE)[0][0] == (
        LetterFlag.NONE
    )
    again = index.set_flags(a.id, [one], LetterFlag.COMPLAINED, LetterFlag.NONE)
    assert LetterFlag.COMPLAINED in again[0][0]
    index.set_flags(a.id, [one], mine, LetterFlag.NONE)
    letter = index.letter(a.id, one)
    assert letter is not None and letter.flags == mine
    assert index.entries(a.id, "Inbox")[0].flags == mine
    ids = index.begin_delivery(
        b"s", meta(), [NewStoredLetter(a.id, "Spam", (), flags=mine)], delivered=True
    )
    assert index.entries(a.id, "Spam") == [FolderEntry(1, ids[0], mine)]


def test_delete_user_marks_its_letters_and_drops_the_account(
    index: MailIndex, clock: FakeClock
) -> None:
    a = index.add_user("a@example.org", "h")
    b = index.add_user("b@example.org", "h")
    index.add_session(b"t" * 32, a.id, clock.now + 60)
    kept = deliver(index, b.id, "b", 5)
    gone = [deliver(index, a.id, "1", 5), deliver(index, a.id, "2")]
    pending = index.begin_delivery(b"s", meta(), [NewStoredLetter(a.id, "Inbox", refs(7))])
    with pytest.raises(InvalidInput, match="being delivered"):
        index.delete_user(a.id)  # a delivery under way: nothing changed
    assert index.user_by_id(a.id) is not None
    index.finish_delivery(pending)
    assert index.delete_user(a.id) == 3
    assert index.user("a@example.org") is None and index.user_by_id(a.id) is None
    assert index.session_user(b"t" * 32, clock.now) is None
    assert index.folders(a.id) == []
    assert sorted(i for i, _ in index.deletions(10)) == sorted([*gone, *pending])
    assert index.delete_user(a.id) is None  # again: nothing left
    assert index.letter(b.id, kept) is not None and index.user_by_id(b.id) is not None
    again = index.add_user("a@example.org", "h2")  # the address can be taken again
    assert again.id != a.id and index.letters(again.id, "Inbox", 10, None) == []
