"""Delivery of one letter to N recipients (SPEC §1 "the letter's path", §3), each step once:

0. prepare (:mod:`pochta.mailbox.prepare`, in a worker process on the SMTP path): parse the
   letter once, analyze it for the verdict, take its shingles, split it into skeleton +
   extracted attachments;
1. decide the verdict (the counters, the rules, the model: in the worker of step 0 when it
   can, see :mod:`pochta.mailbox.intake`); make it personal
   (:mod:`pochta.mailbox.personal`: each recipient's own words and sender list) and group
   the recipients by the verdict they get (one group unless someone's words or list decide
   otherwise); put each group's
   header lines in front of its skeleton;
2. write N letters PENDING, one skeleton shared by each group (by all, in the common case),
   each reference with its own random magic; the attachments are the same for every group
   (content-addressed: stored once, counted once per letter);
3. count every attachment once per letter in the blob store (upload the first time, inc after),
   each count carrying its operation id (``journal.count_op``);
4. mark the letters DELIVERED. Only then is the delivery acknowledged;
5. count the shingles computed in 0 with the installation's verdict (never a personal one:
   one person's list must not teach everyone), in a worker process when there are workers
   (``Scanner.teacher``). This never fails the delivery: the letter is stored, and a 4xx now
   would make the sender deliver it twice.

A failure in 3 undoes exactly the counts made (``Deletions.abandon``); a crash in 3 leaves
PENDING letters for ``Deletions.recover``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from pochta import metrics
from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.verdict import Scanner, Verdict
from pochta.blobs.keys import random_magic
from pochta.blobs.store import BlobStore
from pochta.errors import InvalidInput, StorageError, TooLarge
from pochta.mailbox.deletion import Deletions
from pochta.mailbox.journal import Journal, count_op
from pochta.mailbox.personal import Personal
from pochta.mailbox.prepare import Prepared, prepare
from pochta.mailbox.trace import verdict_headers
from pochta.mime.split import Extracted, Split, prefixed
from pochta.types import (
    Activity,
    AttachmentRef,
    Clock,
    DeliveryIndex,
    Envelope,
    LetterFlag,
    LetterMeta,
    NewStoredLetter,
    User,
)

log = logging.getLogger("pochta.delivery")


@dataclass(frozen=True, slots=True)
class Delivered:
    ids: list[int]  # one per recipient, in their order
    size: int  # bytes of the letter as delivered
    stored: int  # bytes the delivery added physically (skeleton + attachments first stored)
    attachments: int  # extracted parts
    uploaded: int  # of which newly uploaded (the rest were deduplicated)
    verdict: Verdict | None = None


class Delivery:
    """Stores letters; counts attachments on its own pool of threads (``close`` joins it)."""

    def __init__(
        self,
        index: DeliveryIndex,
        blobs: BlobStore,
        journal: Journal,
        deletions: Deletions,
        *,
        inline_limit: int = 4096,
        max_message_size: int = 50 << 20,
        shingler: Shingler | None = None,
        scanner: Scanner | None = None,
        activity: Activity | None = None,
        personal: Personal | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.index = index
        self.blobs = blobs
        self.journal = journal
        self.deletions = deletions
        self.inline_limit = inline_limit
        self.max_message_size = max_message_size
        self.shingler = shingler
        self.scanner = scanner
        self.activity = activity
        self.personal = personal if personal is not None else Personal()
        self._clock = clock
        # threads are made on the first submit, not here
        self._counting = ThreadPoolExecutor(max_workers=16, thread_name_prefix="pochta-count")

    def close(self) -> None:
        self._counting.shutdown(wait=True)

    def deliver(
        self,
        raw: bytes,
        recipients: Sequence[User],
        *,
        folder: str | None = None,
        envelope: Envelope | None = None,
        helo: str | None = None,
        scan: bool = False,
        flags: LetterFlag = LetterFlag.NONE,
        received: float | None = None,
    ) -> Delivered:
        """Store one letter for its recipients. With ``scan`` (the SMTP path) the letter is
        scored first: it goes to Spam unless the verdict is ham, and gets ``X-Pochta-Spam``
        and ``Authentication-Results`` headers; its shingles are counted with the verdict once
        it is delivered. Without, it goes to ``folder`` (default Inbox) as it is (import, IMAP
        APPEND). ``flags`` and ``received`` (default: now): what the letters start with."""
        self.check_size(len(raw))
        prepared = prepare(
            raw,
            envelope,
            helo,
            inline_limit=self.inline_limit,
            analyzer=self.scanner.analyzer if scan and self.scanner is not None else None,
            shingles=scan and self.shingler is not None,
        )
        return self.deliver_prepared(
            prepared, recipients, folder=folder, flags=flags, received=received
        )

    def check_size(self, size: int) -> None:
        if size > self.max_message_size:
            raise TooLarge(f"the letter has {size} bytes; the limit is {self.max_message_size}")

    def deliver_prepared(
        self,
        prepared: Prepared,
        recipients: Sequence[User],
        *,
        folder: str | None = None,
        flags: LetterFlag = LetterFlag.NONE,
        received: float | None = None,
        files: Mapping[int, Path] | None = None,
        queued: str | None = None,
    ) -> Delivered:
        """Steps 1 to 5, once the letter is prepared (in a worker, or by ``deliver``).
        ``files``: extracted parts (by index) whose content a worker wrote to a file rather
        than sending it back (see ``mailbox.intake``); read from there as they are stored.
        ``queued``: the incoming queue's entry the letter comes from, recorded in the index
        in the transaction that makes the letters DELIVERED (step 4: exactly once)."""
        self.check_size(prepared.size)
        unique = list({u.id: u for u in recipients}.values())
        if not unique:
            raise InvalidInput("a letter needs at least one recipient")
        verdict = None
        groups: list[tuple[Verdict | None, list[User]]] = [(None, unique)]
        if prepared.analysis is not None and self.scanner is not None:
            if prepared.verdict is not None:  # decided by the worker that analyzed it
                verdict = prepared.verdict
                self.scanner.record(prepared.analysis, verdict)
            else:
                verdict = self.scanner.decide(prepared.analysis)
            groups = list(
                self.personal.groups(
                    verdict, prepared.from_address, unique, prepared.analysis, prepared.candidates
                )
            )
        when = self._clock() if received is None else received
        written: list[tuple[Split, list[NewStoredLetter], list[int]]] = []
        try:
            for mine, users in groups:
                parts = prepared.split
                into = folder
                if mine is not None and self.scanner is not None:
                    head = verdict_headers(mine, self.scanner.authserv_id, prepared.eol)
                    parts = prefixed(parts, head)
                    into = folder or mine.folder
                into = into or "Inbox"
                size = prepared.size + len(parts.skeleton) - len(prepared.split.skeleton)
                meta = LetterMeta(size, when, prepared.date, prepared.sender, prepared.subject)
                new = [
                    NewStoredLetter(
                        user.id,
                        into,
                        tuple(
                            AttachmentRef(p.index, p.key, p.size, p.crc32, random_magic())
                            for p in parts.parts
                        ),
                        mine.label if mine is not None else None,
                        flags,
                    )
                    for user in users
                ]
                # nothing to count and one group: one write, and it is delivered
                at_once = not parts.parts and len(groups) == 1
                ids = self.index.begin_delivery(
                    parts.skeleton, meta, new, delivered=at_once, queued=queued if at_once else None
                )
                written.append((parts, new, ids))
        except BaseException:
            self.deletions.abandon([i for _, _, ids in written for i in ids])
            raise
        parts, _, _ = written[0]
        letters = [n for _, new, _ in written for n in new]
        ids = [i for _, _, got in written for i in got]
        uploaded: set[str] = set()
        if parts.parts or len(groups) > 1:
            try:
                if parts.parts:
                    uploaded = self._count(parts, letters, ids, files or {})
            except BaseException:
                self.deletions.abandon(ids)
                raise
            if self.index.finish_delivery(ids, queued=queued) < len(ids):
                raise StorageError(
                    "the delivery took longer than mailbox.pending_grace_seconds and was undone;"
                    " try again"
                )
            self.journal.settled(
                count_op(i, ref) for i, new in zip(ids, letters, strict=True) for ref in new.refs
            )
        if verdict is not None and self.scanner is not None:
            self.scanner.learn(verdict, packed=prepared.refs)
            if self.activity is not None:
                self.activity.delivered(verdict.label, [s.symbol for s in verdict.signs], len(ids))
        elif self.shingler is not None and prepared.shingles:
            self.shingler.count(list(prepared.shingles), "ham")
        skeletons = sum(len(p.skeleton) for p, _, _ in written)
        stored = skeletons + sum(p.size for p in parts.parts if p.key in uploaded)
        size = prepared.size + len(parts.skeleton) - len(prepared.split.skeleton)
        if len(groups) > 1:  # the ids in the recipients' order, as with one group
            by_user = {new.user_id: i for i, new in zip(ids, letters, strict=True)}
            ids = [by_user[u.id] for u in unique]
        done = Delivered(ids, size, stored, len(parts.parts), len(uploaded), verdict)
        saved = sum(p.size for p in parts.parts) * len(ids) - (stored - skeletons)
        metrics.stored(len(ids), size, stored, done.attachments, done.uploaded, saved)
        log.debug(
            "stored letter(s) %s in %s: %d attachment(s), %d uploaded, %d bytes added",
            ",".join(map(str, ids)), ",".join(n.folder for n in letters[:1]), done.attachments,
            done.uploaded, stored,
        )  # fmt: skip
        return done

    def _count(
        self,
        parts: Split,
        letters: list[NewStoredLetter],
        ids: list[int],
        files: Mapping[int, Path],
    ) -> set[str]:
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
            path = files.get(part.index)
            chunks = [part.content] if path is None else _chunks_of(path)
            op = count_op(letter_id, ref)
            return self.blobs.upload(part.key, ref.magic, chunks, part.size, op).first_copy

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


def _chunks_of(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    """A file's bytes, ``size`` at a time (the blob store checks them against the key)."""
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk
