"""Reading: folders, letter lists, a letter reassembled byte for byte, its attachments, and
the user's changes to flags and folders, which feed the shingles' counters (SPEC §3)."""

from __future__ import annotations

import dataclasses

from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.verdict import Scanner
from pochta.blobs.store import BlobStore
from pochta.errors import MessageNotFound
from pochta.mailbox.feedback import SPAM, Feedback, State, moved_flags
from pochta.mime.letter import Letter, parse
from pochta.mime.split import reassemble
from pochta.types import Activity, Folder, LetterFlag, ReadingIndex, StoredLetter

__all__ = ["SPAM", "Reading"]


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

    def folders(self, user_id: int) -> list[Folder]:
        return self.index.folders(user_id)

    def add_folder(self, user_id: int, name: str) -> Folder:
        return self.index.add_folder(user_id, name)

    def letters(
        self, user_id: int, folder: str = "Inbox", limit: int = 50, cursor: int | None = None
    ) -> list[StoredLetter]:
        return self.index.letters(user_id, folder, limit, cursor)

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

    def message(self, user_id: int, letter_id: int) -> tuple[StoredLetter, Letter]:
        letter = self.letter(user_id, letter_id)
        return letter, parse(self._raw(letter_id), inline_limit=self.inline_limit)

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
