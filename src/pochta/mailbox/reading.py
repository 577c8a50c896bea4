"""Reading: a letter reassembled byte for byte, its attachments and extracted parts, and the
user's changes to flags and folders, which feed the shingles' counters (SPEC §3). Folders and
letter lists are plain reads of the index: ``Mailbox`` makes them itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.signs import checks as phishing
from pochta.antispam.signs.registry import Sign
from pochta.antispam.verdict import Scanner, Verdict
from pochta.blobs.store import BlobStore
from pochta.errors import MessageNotFound
from pochta.mailbox.feedback import SPAM, Feedback, State, moved_flags
from pochta.mime.letter import Letter, parse
from pochta.mime.skeleton import Ref
from pochta.mime.split import reassemble
from pochta.types import Activity, FolderEntry, LetterFlag, ReadingIndex, StoredLetter

__all__ = ["HIDDEN", "SPAM", "Reading"]

HIDDEN = LetterFlag.COMPLAINED | LetterFlag.UNSPAMMED | LetterFlag.SAID_SPAM
"""pochta's own flags: never a client's to set or clear (IMAP STORE, APPEND)."""
KEYWORDS = LetterFlag.JUNK | LetterFlag.NOT_JUNK

WHOLE_READ = 1 << 20  # extracted parts up to this size are read whole (one read, checked)


class Reading:
    def __init__(
        self,
        index: ReadingIndex,
        blobs: BlobStore,
        *,
        inline_limit: int = 4096,
        shingler: Shingler | None = None,
        scanner: Scanner | None = None,
        activity: Activity | None = None,
    ) -> None:
        self.index = index
        self.blobs = blobs
        self.inline_limit = inline_limit
        self.shingler = shingler
        self.scanner = scanner
        self.activity = activity
        self.feedback = Feedback(
            index,
            self._raw,
            inline_limit=inline_limit,
            shingler=shingler,
            scanner=scanner,
            activity=activity,
        )

    def letter(self, user_id: int, letter_id: int) -> StoredLetter:
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

    def part(self, ref: Ref) -> Iterator[bytes]:
        """An extracted part's decoded content, checked against the letter's size and CRC-32
        before its first byte is given (the other copy when the first differs)."""
        if ref.size <= WHOLE_READ:
            yield self.blobs.read(ref.key, ref.size, ref.crc32)
            return
        opened = self.blobs.open(ref.key, expect_size=ref.size, expect_crc32=ref.crc32)
        try:
            yield from opened
        finally:
            opened.reader.close()

    def message(self, user_id: int, letter_id: int) -> tuple[StoredLetter, Letter]:
        letter = self.letter(user_id, letter_id)
        return letter, parse(self._raw(letter_id), inline_limit=self.inline_limit)

    def warnings(self, parsed: Letter) -> list[Sign]:
        """The phishing signs a stored letter shows its reader (webmail's banner, the API's
        warnings): the checks of the letter as stored, and the signs an exemption withheld
        (``signs.checks.find``: it rested on the From domain, or, with no envelope here, on
        the To field) that its verdict counted at delivery (pochta's own ``X-Pochta-Spam``
        names them: DMARC or SPF showed the From domain forged, ``verdict.from_forged``)."""
        found = phishing.find(parsed)
        if not found.withheld:
            return found.signs
        counted = Verdict.counted(parsed.header("x-pochta-spam"))
        return found.signs + [s for s in found.withheld if s.symbol in counted]

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
        parsed: Letter | None = None,
    ) -> StoredLetter:
        """Change flags or the folder; what the change says is taught by the one feedback
        rule (:mod:`pochta.mailbox.feedback`: a move into Spam = "spam", out of it = "not
        spam", seen for the first time = read). A move drops the keyword it contradicts
        (``$NotJunk`` going into Spam, ``$Junk`` out of it). The index says what the letter
        was just before this change, in the same atomic step, so two concurrent moves (a
        double click) count once. ``parsed``: the letter already parsed by the caller (it
        is parsed here only when some feedback needs it)."""
        changed = self.index.update(user_id, letter_id, seen=seen, flagged=flagged, folder=folder)
        if changed is None:
            raise MessageNotFound(f"no message {letter_id}")
        before, letter = changed.before, changed.after
        flags = letter.flags
        if letter.folder != before.folder:
            keep = moved_flags(flags, letter.folder)
            if keep != flags:
                done = self.index.set_flags(user_id, [letter_id], LetterFlag.NONE, flags & ~keep)
                if done:
                    flags = done[0][1].flags
                    letter = dataclasses.replace(letter, flags=flags)
        self.feedback.changed(
            user_id,
            letter_id,
            State(before.folder, before.flags),
            State(letter.folder, flags),
            letter.verdict,
            parsed,
        )
        return letter

    def set_flags(
        self, user_id: int, letter_ids: Sequence[int], add: LetterFlag, remove: LetterFlag
    ) -> list[tuple[LetterFlag, FolderEntry]]:
        """Set and clear flags (a client's: pochta's own, :data:`HIDDEN`, are left alone);
        \\Seen set for the first time and ``$Junk`` / ``$NotJunk`` that turn the owner's word
        over teach (the one feedback rule). (flags before, entry after) of each letter
        changed, as ``FlagIndex.set_flags`` gives them."""
        add &= ~HIDDEN
        remove &= ~HIDDEN
        changed = self.index.set_flags(user_id, letter_ids, add, remove)
        for before, entry in changed:
            read = LetterFlag.SEEN in entry.flags and LetterFlag.SEEN not in before
            if not read and (before & KEYWORDS) == (entry.flags & KEYWORDS):
                continue  # nothing the rule reads changed: the letter is not even read
            letter = self.index.letter(user_id, entry.letter_id)
            if letter is None:
                continue
            self.feedback.changed(
                user_id,
                entry.letter_id,
                State(letter.folder, before),
                State(letter.folder, entry.flags),
                letter.verdict,
            )
        return changed
