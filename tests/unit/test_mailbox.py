"""The mailbox service over real SQLite and real local disks (no servers)."""

from __future__ import annotations

import hashlib
import mailbox as stdlib_mailbox
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.mailtools import letter, payload

from pochta.app import Pochta, build
from pochta.blobs.keys import blob_path
from pochta.config import load_settings
from pochta.errors import (
    BlobNotFound,
    InvalidCredentials,
    MessageNotFound,
    ResetRequired,
    StorageError,
    TooLarge,
)
from pochta.mailbox.deletionjob import DeletionJob
from pochta.mailbox.importer import import_letters, sources, split_mbox
from pochta.mailbox.journal import SETTLE_BATCH, count_op, dec_op
from pochta.mime.split import split
from pochta.types import AttachmentRef, FileFlag, LetterMeta, NewStoredLetter, Space, User

PASSWORD = "correct horse battery"


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    p = build(load_settings(data_dir=tmp_path / "data", smtp={"max_message_size": 5 << 20}))
    yield p
    p.close()


def users(p: Pochta, n: int) -> list[User]:
    return [p.mailbox.index.add_user(f"u{i}@example.org", "x") for i in range(n)]


def key_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_raw_comes_back_byte_for_byte(pochta: Pochta) -> None:
    (u,) = users(pochta, 1)
    raw = letter(attachments=[("report.pdf", payload(1, 50_000))])
    done = pochta.mailbox.deliver(raw, [u])
    assert done.attachments == 1 and done.uploaded == 1
    assert done.stored < len(raw)
    assert pochta.mailbox.raw(u.id, done.ids[0]) == raw


def test_fan_out_stores_once_and_deletes_only_with_the_last(pochta: Pochta) -> None:
    rcpts = users(pochta, 50)
    att = payload(2, 200_000)
    raw = letter(attachments=[("big.bin", att)])
    done = pochta.mailbox.deliver(raw, rcpts)
    key = key_of(att)
    record = pochta.blobs.stat(key)
    assert record.counter == 50
    files = list((pochta.settings.data_dir / "disks").rglob(key))
    assert len(files) == 2  # one copy on each disk of the pair
    for user, letter_id in zip(rcpts[:49], done.ids[:49], strict=True):
        pochta.mailbox.delete(user.id, letter_id)
    assert pochta.mailbox.process_deletions() == 49
    assert pochta.blobs.stat(key).counter == 1
    last = rcpts[49]
    assert pochta.mailbox.raw(last.id, done.ids[49]) == raw
    assert pochta.mailbox.attachment(last.id, done.ids[49], 0)[0] == att
    pochta.mailbox.delete(last.id, done.ids[49])
    pochta.mailbox.process_deletions()
    assert pochta.blobs.stat(key).space is Space.DELETED
    assert pochta.mailbox.fsck().ok


def test_every_recipient_draws_its_own_magic(pochta: Pochta) -> None:
    rcpts = users(pochta, 3)
    done = pochta.mailbox.deliver(letter(attachments=[("a", payload(3, 9000))]), rcpts)
    magics = {pochta.mailbox.index.content(i)[1][0].magic for i in done.ids}
    assert len(magics) == 3


def test_a_failed_count_undoes_the_whole_delivery(
    pochta: Pochta, monkeypatch: pytest.MonkeyPatch
) -> None:
    rcpts = users(pochta, 5)
    att = payload(4, 20_000)
    before = pochta.mailbox.deliver(letter(attachments=[("a", att)]), rcpts[:1])
    calls = 0
    real_inc = pochta.blobs.inc

    def flaky_inc(key: str, magic: int, op: bytes | None = None) -> object:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise StorageError("the FileDB went away")
        return real_inc(key, magic, op)

    monkeypatch.setattr(pochta.blobs, "inc", flaky_inc)
    with pytest.raises(StorageError):
        pochta.mailbox.deliver(letter(subject="again", attachments=[("a", att)]), rcpts)
    monkeypatch.undo()
    record = pochta.blobs.stat(key_of(att))
    assert record.counter == 1  # only the first letter's reference
    assert pochta.mailbox.index.stats().letters == 1
    assert pochta.mailbox.raw(rcpts[0].id, before.ids[0])
    assert_exact(pochta)


def assert_exact(p: Pochta) -> None:
    """Every counter equals its references, every magic their sum; the journal is empty."""
    p.mailbox.settle()
    report = p.mailbox.fsck()
    assert report.ok, report
    assert (report.leaks, report.miscounted) == ([], [])
    assert p.blobs.journal() == []


def cut_delivery(
    p: Pochta, u: User, raw: bytes, counted: list[bool], received: float = 0.0
) -> list[AttachmentRef]:
    """What a SIGKILL in the middle of ``deliver`` leaves: the letter PENDING and, of its
    references, those in ``counted`` counted (with their journaled operation ids)."""
    parts = split(raw)
    refs = [
        AttachmentRef(part.index, part.key, part.size, part.crc32, 70 + part.index)
        for part in parts.parts
    ]
    (letter_id,) = p.mailbox.index.begin_delivery(
        parts.skeleton,
        LetterMeta(len(raw), received, None, "", ""),
        [NewStoredLetter(u.id, "Inbox", tuple(refs))],
    )
    for ref, done in zip(refs, counted, strict=True):
        if done:
            p.blobs.inc(ref.key, ref.magic, count_op(letter_id, ref))
    return refs


def test_a_crash_mid_delivery_undoes_exactly_the_counts_made(pochta: Pochta) -> None:
    (u,) = users(pochta, 1)
    atts = [payload(50 + i, 20_000 + i) for i in range(3)]
    raw = letter(attachments=[(f"a{i}", att) for i, att in enumerate(atts)])
    kept = pochta.mailbox.deliver(raw, [u])
    refs = cut_delivery(pochta, u, raw, [True, False, True])
    assert [pochta.blobs.stat(r.key).counter for r in refs] == [2, 1, 2]
    pochta.mailbox.journal._settled.clear()  # the crash also lost what was to be forgotten
    assert pochta.mailbox.recover() == 1
    pochta.mailbox.process_deletions()
    assert [pochta.blobs.stat(r.key).counter for r in refs] == [1, 1, 1]
    assert pochta.mailbox.raw(u.id, kept.ids[0]) == raw
    assert_exact(pochta)


def test_a_delivery_in_flight_elsewhere_is_left_alone_until_its_grace_runs_out(
    pochta: Pochta,
) -> None:
    (u,) = users(pochta, 1)
    atts = [payload(60 + i, 15_000 + i) for i in range(2)]
    raw = letter(attachments=[(f"a{i}", att) for i, att in enumerate(atts)])
    pochta.mailbox.deliver(raw, [u])
    refs = cut_delivery(pochta, u, raw, [True, False], received=time.time())
    assert pochta.mailbox.recover() == 0  # younger than mailbox.pending_grace_seconds
    assert [pochta.blobs.stat(r.key).counter for r in refs] == [2, 1]
    report = pochta.mailbox.fsck()  # the journal tells fsck which of its counts happened
    assert report.ok and (report.leaks, report.miscounted) == ([], [])
    assert pochta.mailbox.undo_stale(grace=0) == 1
    pochta.mailbox.process_deletions()
    assert [pochta.blobs.stat(r.key).counter for r in refs] == [1, 1]
    assert_exact(pochta)


def test_a_delivery_undone_under_its_feet_is_refused_not_acknowledged(
    pochta: Pochta, monkeypatch: pytest.MonkeyPatch
) -> None:
    (u,) = users(pochta, 1)
    real_upload = pochta.blobs.upload

    def slow_upload(*args: object, **kwargs: object) -> object:
        stored = real_upload(*args, **kwargs)  # type: ignore[arg-type]
        pochta.mailbox.undo_stale(grace=-1)  # it took "longer than the grace": undone
        return stored

    monkeypatch.setattr(pochta.blobs, "upload", slow_upload)
    with pytest.raises(StorageError, match="pending_grace"):
        pochta.mailbox.deliver(letter(attachments=[("a", payload(61, 9_000))]), [u])
    monkeypatch.undo()
    pochta.mailbox.process_deletions()
    assert pochta.mailbox.index.stats().letters == 0
    assert_exact(pochta)


def test_a_crash_between_a_dec_and_its_record_does_not_dec_twice(pochta: Pochta) -> None:
    a, b = users(pochta, 2)
    att = payload(6, 10_000)
    done = pochta.mailbox.deliver(letter(attachments=[("a", att)]), [a, b])
    _, (ref,) = pochta.mailbox.index.content(done.ids[0])
    pochta.mailbox.delete(a.id, done.ids[0])
    pochta.blobs.dec(ref.key, ref.magic, dec_op(done.ids[0], ref))  # then SIGKILL ...
    assert pochta.mailbox.recover() == 0
    pochta.mailbox.process_deletions()  # ... and the restarted worker replays it
    record = pochta.blobs.stat(ref.key)
    assert (record.counter, record.flags) == (1, FileFlag.NONE)
    assert pochta.mailbox.attachment(b.id, done.ids[1], 0)[0] == att
    assert_exact(pochta)
    pochta.mailbox.delete(b.id, done.ids[1])
    pochta.mailbox.process_deletions()
    assert pochta.blobs.stat(ref.key).space is Space.DELETED  # nothing leaked: collectable


def test_a_dec_the_index_lost_track_of_never_deletes_a_referenced_file(pochta: Pochta) -> None:
    a, b = users(pochta, 2)
    att = payload(6, 10_000)
    done = pochta.mailbox.deliver(letter(attachments=[("a", att)]), [a, b])
    _, (ref,) = pochta.mailbox.index.content(done.ids[0])
    pochta.blobs.dec(ref.key, ref.magic)  # outside the journal (an operator, an old version)
    pochta.mailbox.delete(a.id, done.ids[0])
    pochta.mailbox.process_deletions()  # the deletion runs it again
    record = pochta.blobs.stat(ref.key)
    assert record.space is Space.LIVE  # magic disagreed: kept (DO_NOT_DELETE)
    assert pochta.mailbox.attachment(b.id, done.ids[1], 0)[0] == att


def test_the_journal_is_forgotten_in_batches_and_swept_on_start(pochta: Pochta) -> None:
    rcpts = users(pochta, 3)
    att = payload(11, 9_000)
    for i in range(5):
        pochta.mailbox.deliver(letter(subject=f"n{i}", attachments=[("a", att)]), rcpts)
    assert len(pochta.blobs.journal()) == 15  # fewer than a batch: kept for a while
    pochta.mailbox.process_deletions()  # the worker's tick forgets them
    assert pochta.blobs.journal() == []
    for i in range(SETTLE_BATCH // 3 + 1):
        pochta.mailbox.deliver(letter(subject=f"m{i}", attachments=[("a", att)]), rcpts)
    assert len(pochta.blobs.journal()) < SETTLE_BATCH
    foreign = b"another writer's op"
    pochta.blobs.inc(key_of(att), 5, foreign)
    pochta.mailbox.journal._settled.clear()  # a crash
    assert pochta.mailbox.recover() == 0
    assert pochta.blobs.journal() == [foreign]  # not ours: left alone


def test_too_large_and_unknown_letters(pochta: Pochta) -> None:
    (u,) = users(pochta, 1)
    with pytest.raises(TooLarge):
        pochta.mailbox.deliver(b"x" * ((5 << 20) + 1), [u])
    with pytest.raises(MessageNotFound):
        pochta.mailbox.raw(u.id, 12345)
    assert pochta.mailbox.index.stats().letters == 0


def test_login_says_the_same_for_unknown_and_wrong(pochta: Pochta) -> None:
    pochta.mailbox.add_user("carol@example.org", PASSWORD)
    with pytest.raises(InvalidCredentials) as unknown:
        pochta.mailbox.login("nobody@example.org", PASSWORD)
    with pytest.raises(InvalidCredentials) as wrong:
        pochta.mailbox.login("carol@example.org", "wrong password")
    assert unknown.value.message == wrong.value.message
    user, token = pochta.mailbox.login("Carol@Example.org", PASSWORD)
    assert pochta.mailbox.authenticate(token) == user.id
    pochta.mailbox.index.require_reset(["carol@example.org"])
    with pytest.raises(InvalidCredentials):
        pochta.mailbox.authenticate(token)  # sessions of a leaked password end
    with pytest.raises(ResetRequired):
        pochta.mailbox.login("carol@example.org", PASSWORD)
    pochta.mailbox.set_password("carol@example.org", "a brand new secret")
    pochta.mailbox.login("carol@example.org", "a brand new secret")
    stored = pochta.mailbox.index.user("carol@example.org")
    assert stored is not None and stored.password_hash.startswith("$argon2id$")


def test_fsck_finds_damage_loss_and_undercounts(pochta: Pochta) -> None:
    (u,) = users(pochta, 1)
    att = payload(7, 40_000)
    pochta.mailbox.deliver(letter(attachments=[("a", att)]), [u])
    assert pochta.mailbox.fsck().ok
    key = key_of(att)
    copies = sorted((pochta.settings.data_dir / "disks").glob(f"*/{blob_path(key)}"))
    copies[0].write_bytes(b"garbage")
    report = pochta.mailbox.fsck()
    assert not report.ok and len(report.damaged) == 1 and not report.lost
    copies[1].unlink()
    report = pochta.mailbox.fsck()
    assert len(report.lost) == 1
    with pytest.raises(BlobNotFound):
        pochta.blobs.dec(key_of(b"never stored"), 5)


def test_fsck_tells_a_dangerous_undercount_from_one_the_magic_guards(pochta: Pochta) -> None:
    att = payload(8, 40_000)
    done = pochta.mailbox.deliver(letter(attachments=[("a", att)]), users(pochta, 3))
    _, (ref,) = pochta.mailbox.index.content(done.ids[0])
    pochta.blobs.dec(ref.key, ref.magic)  # a dec replayed by a crash: the magic disagrees now
    report = pochta.mailbox.fsck()
    assert report.ok and report.miscounted and not report.undercounted
    pochta.blobs.inc(ref.key, ref.magic)
    db = sqlite3.connect(pochta.settings.data_dir / "filedb.sqlite3")
    with db:  # a counter one short with the magic still agreeing: decs would delete it early
        db.execute("UPDATE live SET counter = counter - 1 WHERE key = ?", (bytes.fromhex(ref.key),))
    db.close()
    report = pochta.mailbox.fsck()
    assert report.undercounted and not report.ok


def test_import_mbox_maildir_and_files(pochta: Pochta, tmp_path: Path) -> None:
    (u,) = users(pochta, 1)
    shared = payload(9, 30_000)
    letters = [
        letter(subject=f"n{i}", attachments=[("same.bin", shared)]).replace(b"\r\n", b"\n")
        for i in range(3)
    ]
    box = stdlib_mailbox.mbox(tmp_path / "in.mbox")
    for raw in letters:
        box.add(raw)
    box.close()
    assert [m.rstrip(b"\n") for m in split_mbox((tmp_path / "in.mbox").read_bytes())] == [
        m.rstrip(b"\n") for m in letters
    ]
    md = stdlib_mailbox.Maildir(tmp_path / "md")
    md.add(letters[0])
    (tmp_path / "eml").mkdir()
    (tmp_path / "eml" / "one.eml").write_bytes(letters[1])
    report = import_letters(
        pochta.mailbox, u, sources([tmp_path / "in.mbox", tmp_path / "md", tmp_path / "eml"])
    )
    assert report.letters == 5 and not report.failed
    assert (report.attachments, report.attachments_uploaded) == (5, 1)
    assert report.savings > 0.5
    assert pochta.blobs.stat(key_of(shared)).counter == 5
    listed = pochta.mailbox.letters(u.id, "Inbox", 10)
    raws = {pochta.mailbox.raw(u.id, m.id) for m in listed}
    assert letters[1] in raws and letters[0] in raws


def _nested(depth: int) -> bytes:
    head, tail = b"", b""
    for i in range(depth):
        b = f"b{i}".encode()
        head += b"Content-Type: multipart/mixed; boundary=" + b + b"\r\n\r\n--" + b + b"\r\n"
        tail = b"\r\n--" + b + b"--\r\n" + tail
    return b"Subject: deep\r\n" + head + b"Content-Type: text/plain\r\n\r\nbottom" + tail


MALFORMED = {
    "truncated": letter(attachments=[("a.bin", payload(20, 9000))])[:-3000],
    "broken_base64": letter(attachments=[("a.bin", payload(21, 9000))]).replace(
        b"\r\n\r\n", b"\r\n\r\n!!", 3
    ),
    "wrong_boundary": letter(attachments=[("a.bin", payload(22, 9000))]).replace(
        b'boundary="', b'boundary="x', 1
    ),
    "missing_final_boundary": letter(attachments=[("a.bin", payload(23, 9000))]).rsplit(
        b"\r\n--", 1
    )[0],
    "eight_bit_and_nul_headers": b"Subject: \xd0\x9f\xd1\x80\xff\x00 nul\r\nFrom: \x00<a@b>\r\n"
    b"\r\nbody\x00\xff\r\n",
    "megabyte_header_line": b"X-Long: " + b"a" * (1 << 20) + b"\r\nSubject: long\r\n\r\nbody\r\n",
    "deeply_nested": _nested(200),
    "no_headers_at_all": b"just some bytes without a blank line",
    "empty": b"",
    "lf_only": letter(attachments=[("a.bin", payload(24, 9000))]).replace(b"\r\n", b"\n"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_mail_is_stored_byte_exactly(pochta: Pochta, name: str) -> None:
    (u,) = users(pochta, 1)
    raw = MALFORMED[name]
    done = pochta.mailbox.deliver(raw, [u])
    assert pochta.mailbox.raw(u.id, done.ids[0]) == raw
    letter_, summary = pochta.mailbox.message(u.id, done.ids[0])
    assert letter_.size == len(raw)
    assert summary is not None
    assert pochta.mailbox.fsck().ok


def test_only_one_process_finishes_deletions_at_a_time(pochta: Pochta) -> None:
    (u,) = users(pochta, 1)
    att = payload(30, 20_000)
    done = pochta.mailbox.deliver(letter(attachments=[("a", att)]), [u])
    other = build(pochta.settings)  # a second process on the same data directory
    try:
        with other.locks.acquire("mailbox-deletions", timeout=5):
            pochta.mailbox.delete(u.id, done.ids[0])
            assert pochta.mailbox.process_deletions() == 0  # the other holds it: no double dec
            assert pochta.blobs.stat(key_of(att)).counter == 1
        assert pochta.mailbox.process_deletions() == 1
        assert pochta.blobs.stat(key_of(att)).space is Space.DELETED
    finally:
        other.close()


def die_holding_the_deletions(p: Pochta) -> None:
    """``p`` takes the deletions' lock in a thread that ends without releasing it: a process
    killed in the middle of finishing deletions (its lease is not renewed, it runs out)."""
    dying = threading.Thread(target=lambda: p.locks.acquire("mailbox-deletions", timeout=5))
    dying.start()
    dying.join()


def test_the_deletion_job_finishes_what_a_killed_holder_left_in_its_first_round(
    tmp_path: Path,
) -> None:
    """After a crash the first round waits out the dead holder's lease (2 s here) and
    finishes the deletions, instead of leaving them to the next round (60 s here)."""
    settings = load_settings(data_dir=tmp_path / "data", guard={"lock_ttl": 2.0})
    pochta, other = build(settings), build(settings)
    job = DeletionJob(pochta.mailbox.deletions, pochta.locks, interval=60)
    try:
        (u,) = users(pochta, 1)
        att = payload(31, 20_000)
        done = pochta.mailbox.deliver(letter(attachments=[("a", att)]), [u])
        pochta.mailbox.delete(u.id, done.ids[0])
        die_holding_the_deletions(other)
        assert pochta.mailbox.process_deletions() == 0  # not waited for: still held
        job.start()
        deadline = time.monotonic() + 20  # far below the 60 s of a second round
        while pochta.mailbox.stats()["pending_deletions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pochta.mailbox.stats()["pending_deletions"] == 0
        assert job.job.stop(timeout=5)  # the round ends after its last commit: joined first
        assert job.job.rounds == 1
        assert pochta.blobs.stat(key_of(att)).space is Space.DELETED
    finally:
        job.stop()
        other.close()
        pochta.close()


def test_a_stopping_deletion_job_does_not_wait_out_a_live_holder(tmp_path: Path) -> None:
    """The round waits for the deletions' lock in steps: a stop comes through within one,
    not after the holder's whole lease (10 s)."""
    settings = load_settings(data_dir=tmp_path / "data", guard={"lock_ttl": 10.0})
    pochta, other = build(settings), build(settings)
    job = DeletionJob(pochta.mailbox.deletions, pochta.locks, interval=60)
    try:
        (u,) = users(pochta, 1)
        done = pochta.mailbox.deliver(letter(attachments=[("a", payload(32, 20_000))]), [u])
        pochta.mailbox.delete(u.id, done.ids[0])
        with other.locks.acquire("mailbox-deletions", timeout=5):  # alive and renewing
            job.start()
            deadline = time.monotonic() + 10
            while not job.job.leading and time.monotonic() < deadline:
                time.sleep(0.05)
            assert job.job.leading
            time.sleep(1.5)  # well into the round's wait (its steps are 1 s)
            asked = time.monotonic()
            assert job.job.stop(timeout=5)  # joined: it did not wait the holder's 10 s out
            assert time.monotonic() - asked < 3.5  # one step, and the round's end
            assert job.job.rounds == 1  # the round ran, and gave up waiting
            assert pochta.mailbox.stats()["pending_deletions"] == 1  # left to the holder
    finally:
        job.stop()
        other.close()
        pochta.close()
