"""Importing existing mail: mbox files, Maildir folders, directories of letter files.

Sources are read byte for byte and each letter is stored exactly as it is in its file:

- a file named on the command line that starts with ``From `` is an mbox: its letters are the
  bytes between one ``From `` separator line and the blank line before the next (``>From``
  quoting left as it is); any other file named is one letter;
- a Maildir (a directory with ``cur/`` or ``new/``): every file of ``new/`` and ``cur/``;
- any other directory: every regular file under it (recursively, hidden ones skipped) is one
  letter, whole, whatever its first line.

Nothing is prepended: an import is not a transport.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pochta.errors import InvalidInput, PochtaError
from pochta.mailbox.feedback import placed_flags
from pochta.mailbox.service import Mailbox
from pochta.types import LetterFlag, User


@dataclass(frozen=True, slots=True)
class Source:
    name: str  # where the letter came from, for messages
    raw: bytes


@dataclass
class ImportReport:
    letters: int = 0
    failed: list[str] = field(default_factory=list)
    bytes_received: int = 0
    bytes_stored: int = 0
    attachments: int = 0
    attachments_uploaded: int = 0

    @property
    def deduplicated(self) -> int:
        return self.attachments - self.attachments_uploaded

    @property
    def savings(self) -> float:
        if not self.bytes_received:
            return 0.0
        return 1 - self.bytes_stored / self.bytes_received


def split_mbox(data: bytes) -> Iterator[bytes]:
    """The letters of an mbox file (mboxo/mboxrd: a line starting with ``From `` at the start
    of the file or after an empty line starts a letter)."""
    starts = []
    pos = 0
    while pos < len(data):
        if data.startswith(b"From ", pos) and (
            pos == 0 or data[max(0, pos - 3) : pos].endswith((b"\n\n", b"\n\r\n"))
        ):
            starts.append(pos)
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        pos = nl + 1
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        body_start = data.find(b"\n", start) + 1 or end
        chunk = data[body_start:end]
        if i + 1 < len(starts):  # the empty line before the next separator belongs to mbox
            chunk = chunk[:-2] if chunk.endswith(b"\r\n") else chunk[:-1]
        yield chunk


def _files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(dirpath) / name


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() or (path / "new").is_dir()


def sources(paths: Sequence[Path]) -> Iterator[Source]:
    """Every letter under the given paths, in a stable order."""
    for path in paths:
        if path.is_dir():
            if _is_maildir(path):
                for sub in ("new", "cur"):
                    if (path / sub).is_dir():
                        for file in _files(path / sub):
                            yield Source(str(file), file.read_bytes())
            else:  # a directory of letter files: each file is one letter, byte for byte
                for file in _files(path):
                    yield Source(str(file), file.read_bytes())
        elif path.is_file():
            yield from _file_sources(path)
        else:
            raise InvalidInput(f"{path} is neither a file nor a directory")


def _file_sources(file: Path) -> Iterator[Source]:
    data = file.read_bytes()
    if data.startswith(b"From "):
        for n, raw in enumerate(split_mbox(data)):
            yield Source(f"{file}#{n + 1}", raw)
    else:
        yield Source(str(file), data)


def total_bytes(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(f.stat().st_size for f in _files(path))
    return total


def import_letters(
    mailbox: Mailbox,
    user: User,
    letters: Iterator[Source],
    *,
    folder: str = "Inbox",
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    report = ImportReport()
    # imported into Spam: its owner called it spam (the feedback rule's baseline)
    flags = placed_flags(folder, LetterFlag.NONE)
    for source in letters:
        try:
            done = mailbox.deliver(source.raw, [user], folder=folder, flags=flags)
        except PochtaError as exc:
            report.failed.append(f"{source.name}: {exc.message}")
        else:
            report.letters += 1
            report.bytes_received += done.size
            report.bytes_stored += done.stored
            report.attachments += done.attachments
            report.attachments_uploaded += done.uploaded
        if progress is not None:
            progress(len(source.raw))
    return report
