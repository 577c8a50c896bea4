"""Letters to train on from the installation itself: what its users filed, read through the
mailbox (the index's stored verdict, the letters' bytes from the blob store).

A letter counts by where its owner keeps it and what pochta said when it arrived:

    in Spam,     pochta said spam or phishing  -> spam  (the base: pochta was right)
    in Spam,     pochta said ham               -> spam  (moved into Spam: a correction)
    elsewhere,   pochta said ham               -> ham   (the base)
    elsewhere,   pochta said spam or phishing  -> ham   (moved out of Spam: a correction)

Letters pochta never scored (appended, sent, imported) and letters in Trash (a user's
"delete" says nothing about spam) are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pochta.mailbox.service import Mailbox
from pochta_factory.corpus import CorpusLetter, Label, header_date
from pochta_factory.sources import MAX_BYTES, MAX_LETTERS, Read

SPAM_FOLDER = "Spam"
SKIPPED_FOLDERS = frozenset({"Trash"})
PAGE = 500


@dataclass
class Installation:
    ham: Read = field(default_factory=Read)
    spam: Read = field(default_factory=Read)
    corrections: dict[str, int] = field(
        default_factory=lambda: {"moved_into_spam": 0, "moved_out_of_spam": 0}
    )
    unscored: int = 0
    users: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "users": self.users,
            "ham": self.ham.as_dict(),
            "spam": self.spam.as_dict(),
            "corrections": dict(self.corrections),
            "unscored": self.unscored,
        }


def label_of(folder: str, verdict: str | None) -> tuple[Label, bool] | None:
    """(label, whether the owner corrected pochta), or None for a letter that teaches
    nothing."""
    if verdict not in ("ham", "spam", "phishing") or folder in SKIPPED_FOLDERS:
        return None
    said_spam = verdict != "ham"
    if folder == SPAM_FOLDER:
        return "spam", not said_spam
    return "ham", said_spam


def read(
    mailbox: Mailbox,
    *,
    limit: int = MAX_LETTERS,
    max_bytes: int = MAX_BYTES,
    progress: Callable[[int], None] | None = None,
) -> Installation:
    """Every user's scored letters, labelled as the module's doc says; at most ``limit``
    letters and ``max_bytes`` bytes of each kind (more is an InvalidInput)."""
    out = Installation()
    for user in mailbox.index.users():
        out.users += 1
        for folder in mailbox.folders(user.id):
            cursor: int | None = None
            while True:
                page = mailbox.letters(user.id, folder.name, PAGE, cursor)
                for stored in page:
                    labelled = label_of(stored.folder, stored.verdict)
                    if labelled is None:
                        out.unscored += stored.verdict is None
                        continue
                    label, corrected = labelled
                    read_ = out.spam if label == "spam" else out.ham
                    raw = mailbox.raw(user.id, stored.id)
                    name = f"{user.email}/{stored.folder}/{stored.id}"
                    at = datetime.fromtimestamp(stored.received, UTC)
                    letter = CorpusLetter(label, name, raw, label, header_date(raw), at)
                    read_.add(letter, limit, max_bytes)
                    if corrected:
                        key = "moved_into_spam" if label == "spam" else "moved_out_of_spam"
                        out.corrections[key] += 1
                    if progress is not None:
                        progress(1)
                if len(page) < PAGE:
                    break
                cursor = page[-1].id
    return out
