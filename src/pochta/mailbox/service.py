"""The mailbox: delivery, reading, flags and folders, deletion, and the checks over them.

Delivery of one letter to N recipients (SPEC §3):

1. split it once: skeleton + extracted attachments (``pochta.mime``);
2. write N letters PENDING with one shared skeleton, each reference with its own random magic;
3. count every attachment once per letter in the blob store (upload the first time, inc after);
4. mark the letters DELIVERED. Only then is the delivery acknowledged.

Counts are exactly-once although the index and the FileDB are two databases. Every count
and every dec carries an operation id (the letter, the reference and its magic), which the
FileDB journals in the same atomic step (``FileDB.applied``):

- a failure or a crash in 3 leaves PENDING letters. ``abandon`` (at once) or ``recover`` (on
  the next start) asks the journal which of their counts happened, drops the references that
  were never counted and turns the letters into deletions, so exactly the counts made are
  undone;
- deletion: the letter becomes DELETING in one write, then ``process_deletions`` decs each
  reference and removes it, and finally the letter. A crash between a dec and the removal of
  its reference replays the dec on restart; the FileDB sees its id journaled and does nothing.

Journal entries are forgotten once the index holds the outcome (DELIVERED, or the reference
removed), in batches; a crash leaves a few, which ``recover`` sweeps. Magic stays the second
line of defence: a count the index lost track of (an old database, an operator's hand) makes
the sums disagree, and the FileDB keeps the file (DO_NOT_DELETE).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import secrets
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from pochta.antispam.shingler import Shingler
from pochta.antispam.shingles import Envelope
from pochta.antispam.verdict import Scanner, Verdict
from pochta.blobs.keys import add_magic, random_magic
from pochta.blobs.store import BlobStore
from pochta.errors import (
    BlobNotFound,
    InvalidCredentials,
    InvalidInput,
    LeaseLost,
    MessageNotFound,
    PochtaError,
    ResetRequired,
    StorageError,
    TooLarge,
)
from pochta.guard.lock import Lease, Locks
from pochta.guard.logins import LoginGuard
from pochta.guard.passwords import hash_password, verify_password
from pochta.mailbox.trace import line_ending
from pochta.mime.split import Extracted, Split, reassemble, split
from pochta.mime.summary import Summary, summarize
from pochta.types import (
    AttachmentRef,
    Clock,
    Folder,
    Letter,
    LetterMeta,
    LetterState,
    MailIndex,
    NewLetter,
    Op,
    Space,
    User,
)

log = logging.getLogger("pochta.mailbox")

MIN_PASSWORD = 8
SPAM = "Spam"
DELETIONS_LOCK = "mailbox-deletions"
SETTLE_BATCH = 256  # journal entries forgotten per FileDB write

_OP = struct.Struct(">cQII")  # kind, letter id, reference number, magic: 17 bytes
COUNT, DEC = b"c", b"d"


def count_op(letter_id: int, ref: AttachmentRef) -> Op:
    """The operation id of counting ``ref`` for letter ``letter_id`` (upload or inc)."""
    return _OP.pack(COUNT, letter_id, ref.n, ref.magic)


def dec_op(letter_id: int, ref: AttachmentRef) -> Op:
    """The operation id of the dec that deletes ``ref`` of letter ``letter_id``. The magic
    is part of it, so an id the index reuses for a new letter never matches an old entry."""
    return _OP.pack(DEC, letter_id, ref.n, ref.magic)


def _parse_op(op: Op) -> tuple[bytes, int, int] | None:
    if len(op) != _OP.size or op[:1] not in (COUNT, DEC):
        return None
    kind, letter_id, n, _magic = _OP.unpack(op)
    return kind, letter_id, n


def _token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True, slots=True)
class Delivered:
    ids: list[int]
    size: int  # bytes of the letter as delivered
    stored: int  # bytes the delivery added physically (skeleton + attachments first stored)
    attachments: int  # extracted parts
    uploaded: int  # of which newly uploaded (the rest were deduplicated)
    verdict: Verdict | None = None


@dataclass
class FsckReport:
    letters: int = 0
    refs: int = 0
    blobs: int = 0
    lost: list[str] = field(default_factory=list)  # a letter's attachment has no good copy
    damaged: list[str] = field(default_factory=list)  # one copy missing or wrong
    undercounted: list[str] = field(default_factory=list)  # counter below references: danger
    unreadable: list[str] = field(default_factory=list)  # skeleton and references disagree
    leaks: list[str] = field(default_factory=list)  # counted more than referenced: kept, safe
    # counted less than referenced, but the magic disagrees: never deleted automatically
    miscounted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.damaged or self.undercounted or self.unreadable)


class Mailbox:
    def __init__(
        self,
        index: MailIndex,
        blobs: BlobStore,
        *,
        inline_limit: int = 4096,
        max_message_size: int = 50 << 20,
        session_ttl: float = 30 * 86400,
        pending_grace: float = 600.0,
        logins: LoginGuard | None = None,
        locks: Locks | None = None,
        shingler: Shingler | None = None,
        scanner: Scanner | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.shingler = shingler
        self.scanner = scanner
        self.logins = logins
        self.locks = locks
        self.index = index
        self.blobs = blobs
        self.inline_limit = inline_limit
        self.max_message_size = max_message_size
        self.session_ttl = session_ttl
        self.pending_grace = pending_grace
        self._clock = clock
        self._counting = ThreadPoolExecutor(max_workers=16, thread_name_prefix="pochta-count")
        self._deleting = threading.Lock()
        self._settled: list[Op] = []
        self._settled_lock = threading.Lock()

    def close(self) -> None:
        self._counting.shutdown(wait=True)
        self.settle()
        self.index.close()

    # -- users and sessions ------------------------------------------------------------------
    def add_user(self, email: str, password: str) -> User:
        if len(password) < MIN_PASSWORD:
            raise InvalidInput(f"a password needs at least {MIN_PASSWORD} characters")
        return self.index.add_user(email, hash_password(password))

    def set_password(self, email: str, password: str) -> None:
        if len(password) < MIN_PASSWORD:
            raise InvalidInput(f"a password needs at least {MIN_PASSWORD} characters")
        user = self.index.user(email)
        if user is None:
            raise InvalidInput(f"no user {email}")
        self.index.set_password(user.id, hash_password(password))

    def check_password(self, email: str, password: str) -> User:
        """The user whose password this is; the same InvalidCredentials for an unknown e-mail
        and a wrong password (an unknown e-mail costs one hash too, so timing tells nothing)."""
        user = self.index.user(email)
        if user is None:
            verify_password(_dummy_hash(), password)
            raise InvalidCredentials("wrong e-mail or password")
        if not verify_password(user.password_hash, password):
            raise InvalidCredentials("wrong e-mail or password")
        if user.reset_required:
            raise ResetRequired(
                "this password appeared in a leak and no longer works; set a new one"
            )
        return user

    def login(self, email: str, password: str, ip: str = "local") -> tuple[User, str]:
        """A session token; RateLimited when this IP or this account tried too often (the
        attempt is charged before the password is looked at)."""
        if self.logins is not None:
            self.logins.check(ip, email)
        user = self.check_password(email, password)
        token = secrets.token_urlsafe(32)
        self.index.add_session(_token_hash(token), user.id, self._clock() + self.session_ttl)
        return user, token

    def authenticate(self, token: str) -> int:
        user_id = self.index.session_user(_token_hash(token), self._clock())
        if user_id is None:
            raise InvalidCredentials("the session token is not valid (log in again)")
        return user_id

    def logout(self, token: str) -> None:
        self.index.drop_session(_token_hash(token))

    def user(self, email: str) -> User | None:
        return self.index.user(email)

    # -- delivery ----------------------------------------------------------------------------
    def deliver(
        self,
        raw: bytes,
        recipients: Sequence[User],
        *,
        folder: str | None = None,
        envelope: Envelope | None = None,
        helo: str | None = None,
        scan: bool = False,
    ) -> Delivered:
        """Store one letter for its recipients. With ``scan`` (the SMTP path) the letter is
        scored first: it goes to Spam unless the verdict is ham, and gets ``X-Pochta-Spam``
        and ``Authentication-Results`` headers; its shingles are counted with the verdict once
        it is delivered. Without, it goes to ``folder`` (default Inbox) as it is (import)."""
        if len(raw) > self.max_message_size:
            raise TooLarge(f"the letter has {len(raw)} bytes; the limit is {self.max_message_size}")
        unique = list({u.id: u for u in recipients}.values())
        if not unique:
            raise InvalidInput("a letter needs at least one recipient")
        verdict = None
        if scan and self.scanner is not None:
            verdict = self.scanner.scan(raw, envelope, helo)
            raw = self._verdict_headers(verdict, raw) + raw
            folder = folder or verdict.folder
        folder = folder or "Inbox"
        parts = split(raw, inline_limit=self.inline_limit)
        meta = _meta(raw, summarize(raw, inline_limit=self.inline_limit), self._clock())
        letters = [
            NewLetter(
                user.id,
                folder,
                tuple(
                    AttachmentRef(p.index, p.key, p.size, p.crc32, random_magic())
                    for p in parts.parts
                ),
                verdict.label if verdict is not None else None,
            )
            for user in unique
        ]
        ids = self.index.begin_delivery(parts.skeleton, meta, letters)
        try:
            uploaded = self._count(parts, letters, ids)
        except BaseException:
            self._abandon(ids)
            raise
        if self.index.finish_delivery(ids) < len(ids):
            raise StorageError(
                "the delivery took longer than mailbox.pending_grace_seconds and was undone;"
                " try again"
            )
        self._settle(
            count_op(i, ref) for i, new in zip(ids, letters, strict=True) for ref in new.refs
        )
        if verdict is not None and self.scanner is not None:
            self.scanner.learn(verdict)
        elif self.shingler is not None and scan:
            self.shingler.observe(raw, envelope, None)
        stored = len(parts.skeleton) + sum(p.size for p in parts.parts if p.key in uploaded)
        return Delivered(ids, len(raw), stored, len(parts.parts), len(uploaded), verdict)

    def _verdict_headers(self, verdict: Verdict, raw: bytes) -> bytes:
        eol = line_ending(raw)
        assert self.scanner is not None
        ar = verdict.auth.header(self.scanner.authserv_id)
        lines = [f"X-Pochta-Spam: {verdict.header()}", f"Authentication-Results: {ar}"]
        return b"".join(_header_line(line, eol) for line in lines)

    def _count(self, parts: Split, letters: list[NewLetter], ids: list[int]) -> set[str]:
        """Count each attachment once per letter, in two concurrent rounds so that the
        counts share the FileDB's group commits: first one count per distinct key (an
        upload, or an inc when the key is live), then every other count (incs). Each count
        carries its operation id; on a failure every count started has ended before this
        raises, so the journal then says exactly which happened."""
        firsts: dict[str, tuple[Extracted, int, AttachmentRef]] = {}
        rest: list[tuple[int, AttachmentRef]] = []
        for part in parts.parts:
            for i, new in zip(ids, letters, strict=True):
                ref = new.refs[part.index]
                if part.key in firsts:
                    rest.append((i, ref))
                else:
                    firsts[part.key] = (part, i, ref)

        def first(part: Extracted, letter_id: int, ref: AttachmentRef) -> bool:
            stored = self.blobs.upload(
                part.key, ref.magic, [part.content], len(part.content), count_op(letter_id, ref)
            )
            return stored.uploaded

        ones = {key: self._counting.submit(first, *args) for key, args in firsts.items()}
        wait(ones.values())
        uploaded = {key for key, future in ones.items() if future.result()}
        incs = [
            self._counting.submit(self.blobs.inc, ref.key, ref.magic, count_op(i, ref))
            for i, ref in rest
        ]
        wait(incs)
        for future in incs:
            future.result()
        return uploaded

    def _abandon(self, ids: list[int]) -> None:
        """A delivery failed: undo exactly the counts it made, through the deletion path, at
        once (unless another process holds the deletions: then it does them). When even that
        fails, the letters stay PENDING or DELETING for ``recover`` or the deletion worker."""
        try:
            self._give_up(ids)
            self.process_deletions()
        except PochtaError as exc:
            log.warning("a failed delivery is left to be undone later: %s", exc.message)

    def _give_up(self, ids: list[int] | None, before: float | None = None) -> int:
        pending = self.index.pending(ids, before)
        ops = {count_op(lid, ref): (lid, ref.n) for lid, refs in pending for ref in refs}
        applied = self.blobs.filedb.applied(list(ops))
        uncounted = [where for op, where in ops.items() if op not in applied]
        changed = self.index.abandon([lid for lid, _ in pending], uncounted)
        self._settle(applied)  # the index now says which counts to undo
        return changed

    def _settle(self, ops: Iterable[Op]) -> None:
        """These journal entries are no longer needed: the index holds the outcome."""
        with self._settled_lock:
            self._settled.extend(ops)
            full = len(self._settled) >= SETTLE_BATCH
        if full:
            self.settle()

    def settle(self) -> None:
        """Forget the settled journal entries now (one FileDB write). On failure they stay
        journaled, which is harmless: ``recover`` sweeps them."""
        with self._settled_lock:
            ops, self._settled = self._settled, []
        if not ops:
            return
        try:
            self.blobs.filedb.forget_ops(ops)
        except PochtaError as exc:
            log.warning("forgetting %d journal entries: %s", len(ops), exc.message)

    # -- reading -----------------------------------------------------------------------------
    def folders(self, user_id: int) -> list[Folder]:
        return self.index.folders(user_id)

    def add_folder(self, user_id: int, name: str) -> Folder:
        return self.index.add_folder(user_id, name)

    def letters(
        self, user_id: int, folder: str = "Inbox", limit: int = 50, cursor: int | None = None
    ) -> list[Letter]:
        return self.index.letters(user_id, folder, limit, cursor)

    def letter(self, user_id: int, letter_id: int) -> Letter:
        letter = self.index.letter(user_id, letter_id)
        if letter is None:
            raise MessageNotFound(f"no message {letter_id}")
        return letter

    def raw(self, user_id: int, letter_id: int) -> bytes:
        """The letter exactly as it was delivered (with pochta's trace header)."""
        self.letter(user_id, letter_id)
        return self._raw(letter_id)

    def _raw(self, letter_id: int) -> bytes:
        skeleton, refs = self.index.content(letter_id)
        by_n = {r.n: r for r in refs}

        def fetch(n: int, _ref: object) -> bytes:
            ref = by_n[n]
            return self.blobs.read(ref.key, ref.size, ref.crc32)

        return reassemble(skeleton, fetch)

    def message(self, user_id: int, letter_id: int) -> tuple[Letter, Summary]:
        letter = self.letter(user_id, letter_id)
        return letter, summarize(self._raw(letter_id), inline_limit=self.inline_limit)

    def attachment(self, user_id: int, letter_id: int, n: int) -> tuple[bytes, str, str | None]:
        """Attachment ``n`` of the letter (decoded): its bytes, content type and file name."""
        letter, summary = self.message(user_id, letter_id)
        for att in summary.attachments:
            if att.n == n:
                return att.content, att.content_type, att.filename
        raise MessageNotFound(f"message {letter.id} has no attachment {n}")

    def update(
        self,
        user_id: int,
        letter_id: int,
        *,
        seen: bool | None = None,
        flagged: bool | None = None,
        folder: str | None = None,
    ) -> Letter:
        """Change flags or the folder. The user's word feeds the shingles' counters: moved
        into Spam = a complaint, out of Spam = "not spam", seen for the first time = read."""
        before = self.letter(user_id, letter_id)
        letter = self.index.update(user_id, letter_id, seen=seen, flagged=flagged, folder=folder)
        if letter is None:
            raise MessageNotFound(f"no message {letter_id}")
        if self.shingler is not None:
            feedback = []
            if letter.folder != before.folder and SPAM in (letter.folder, before.folder):
                feedback.append("spam" if letter.folder == SPAM else "not_spam")
            if letter.seen and not before.seen:
                feedback.append("read")
            if feedback:
                raw = self._raw(letter_id)
                for kind in feedback:
                    self.shingler.feedback(raw, kind)
        return letter

    # -- deletion ----------------------------------------------------------------------------
    def delete(self, user_id: int, letter_id: int) -> None:
        if not self.index.delete(user_id, letter_id):
            raise MessageNotFound(f"no message {letter_id}")

    def recover(self, grace: float | None = None) -> int:
        """On start: ``undo_stale``, then sweep the journal of what a crash left in it."""
        changed = self.undo_stale(grace)
        self.settle()
        self._sweep_journal()
        return changed

    def undo_stale(self, grace: float | None = None) -> int:
        """Undo the deliveries cut short (a crash, a failure whose undo failed too): PENDING
        letters older than ``grace`` seconds (default ``pending_grace``), exactly the counts
        they made. Another process's delivery in flight is younger, and left alone. Returns
        how many letters were undone; the deletion worker finishes them."""
        before = self._clock() - (self.pending_grace if grace is None else grace)
        return self._give_up(None, before)

    def _sweep_journal(self) -> int:
        """Forget journal entries whose outcome the index holds: counts of letters no longer
        PENDING, decs of references removed. Entries of other writers are left alone."""
        swept, after = 0, b""
        while page := self.blobs.filedb.journal(after=after, limit=1000):
            after = page[-1]
            ours = {op: parsed for op in page if (parsed := _parse_op(op)) is not None}
            states = self.index.ref_states([(lid, n) for _, lid, n in ours.values()])
            stale = [
                op
                for op, (kind, lid, n) in ours.items()
                if (state := states.get((lid, n))) is None
                or (kind == COUNT and state is not LetterState.PENDING)
            ]
            if stale:
                self.blobs.filedb.forget_ops(stale)
                swept += len(stale)
        if swept:
            log.info("forgot %d journal entries left by a crash", swept)
        return swept

    def process_deletions(self, batch: int = 100) -> int:
        """Finish recorded deletions; returns how many letters were finished."""
        done = 0
        with self._deleting, contextlib.ExitStack() as stack:
            lease = None
            if self.locks is not None:  # one process at a time: two would dec twice
                lease = self.locks.try_acquire(DELETIONS_LOCK)
                if lease is None:
                    return 0
                stack.callback(_release_quietly, lease)
            while work := self.index.deletions(batch):
                for letter_id, refs in work:
                    for ref in refs:
                        if lease is not None:
                            lease.check()  # LeaseLost: stop; the next holder goes on
                        op = dec_op(letter_id, ref)
                        # BlobNotFound: the record is gone (removed by an operator, or the
                        # replay of a dec whose file has been purged since)
                        with contextlib.suppress(BlobNotFound):
                            self.blobs.dec(ref.key, ref.magic, op)
                        self.index.ref_done(letter_id, ref.n)
                        self._settle([op])
                    self.index.finish_deletion(letter_id)
                    done += 1
                self.settle()
        self.settle()  # also what deliveries settled meanwhile
        return done

    # -- checks ------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        s = self.index.stats()
        physical = s.skeleton_bytes + 2 * s.blob_bytes
        single = s.skeleton_bytes + s.blob_bytes
        return {
            "users": s.users,
            "letters": s.letters,
            "attachment_refs": s.refs,
            "blobs": s.blobs,
            "logical_bytes": s.logical_bytes,
            "skeleton_bytes": s.skeleton_bytes,
            "blob_bytes": s.blob_bytes,
            "physical_bytes": physical,
            "dedup_ratio": s.logical_bytes / single if single else 1.0,
            "pending_deletions": s.pending_deletions,
        }

    def fsck(self, progress: Callable[[int], None] | None = None) -> FsckReport:
        report = FsckReport()
        expected: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # count, magic, live
        wanted: dict[str, tuple[int, int]] = {}
        letters: dict[int, LetterState] = {}

        def add(state: LetterState, ref: AttachmentRef) -> None:
            e = expected[ref.key]
            e[0] += 1
            e[1] = add_magic(e[1], ref.magic)
            if state is not LetterState.DELETING:
                e[2] += 1
            wanted[ref.key] = (ref.size, ref.crc32)

        # a reference in flight or cut short counts when PENDING once its count happened,
        # when DELETING until its dec did: the journal says which
        doubtful: dict[Op, tuple[LetterState, AttachmentRef]] = {}
        for letter_id, state, ref in self.index.all_refs():
            report.refs += 1
            letters[letter_id] = state
            if state is LetterState.DELIVERED:
                add(state, ref)
            else:
                op = (count_op if state is LetterState.PENDING else dec_op)(letter_id, ref)
                doubtful[op] = (state, ref)
        journaled = self.blobs.filedb.applied(list(doubtful)) if doubtful else set()
        for op, (state, ref) in doubtful.items():
            if (op in journaled) == (state is LetterState.PENDING):
                add(state, ref)
        report.letters = self.index.stats().letters
        for key, (count, magic, live_refs) in expected.items():
            report.blobs += 1
            if progress is not None:
                progress(1)
            record = self.blobs.filedb.get(key)
            if record is None or record.space is not Space.LIVE:
                if live_refs:
                    report.lost.append(f"{key}: referenced by {live_refs} letter(s), not live")
                continue
            if record.counter < count and record.magic == magic:
                # the sums agree, yet the counter is short: decs to zero would delete it
                report.undercounted.append(f"{key}: counter {record.counter}, {count} references")
            elif record.counter < count:
                # a count undone or a dec replayed by a crash: the magic no longer sums to the
                # references', so the file can never be deleted automatically (DO_NOT_DELETE
                # when its counter reaches 0): kept, like a leak
                report.miscounted.append(
                    f"{key}: counter {record.counter} for {count} references; magic differs,"
                    " so it is kept"
                )
            elif record.counter > count or record.magic != magic % 2**32:
                report.leaks.append(
                    f"{key}: counter {record.counter} for {count} references"
                    + (" (magic differs)" if record.counter == count else "")
                )
            size, crc32 = wanted[key]
            problems = self.blobs.check_copies(key, size, crc32)
            if len(problems) >= 2:
                report.lost.append(f"{key}: " + "; ".join(problems))
            elif problems:
                report.damaged.append(f"{key}: {problems[0]}")
        return report


def _meta(raw: bytes, summary: Summary, now: float) -> LetterMeta:
    sender = summary.sender
    return LetterMeta(
        size=len(raw),
        received=now,
        date=summary.date.timestamp() if summary.date is not None else None,
        sender=sender[:500],
        subject=summary.subject[:1000],
    )


def _header_line(text: str, eol: bytes) -> bytes:
    """One header field as bytes: printable ASCII, long values folded at spaces."""
    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    words, lines, line = clean.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > 76:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return (eol + b"\t").join(x.encode() for x in lines) + eol


def _release_quietly(lease: Lease) -> None:
    with contextlib.suppress(LeaseLost):
        lease.release()


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))
