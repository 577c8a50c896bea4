"""Letters to train on, read from where an operator keeps mail: Maildir folders, mbox files,
directories of ``.eml`` / ``.txt`` files, single letters (the stdlib's :mod:`mailbox` reads
Maildir and mbox).

Bounded: a letter larger than ``max_size`` is skipped and counted, never read whole; at most
:data:`MAX_LETTERS` letters and :data:`MAX_BYTES` bytes are read from all the paths of one
kind (more is an InvalidInput: training holds them in memory); a path that does not exist is
an InvalidInput naming it.
"""

from __future__ import annotations

import mailbox
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pochta.errors import InvalidInput
from pochta_factory.corpus import CorpusLetter, Label, envelope_date, header_date

MAX_LETTERS = 200_000  # of one kind, from all its paths
MAX_BYTES = 4 * 2**30  # the letters of one kind, all together (training holds them in memory)
SUFFIXES = (".eml", ".txt", ".msg")  # the files a plain directory of letters holds


class Readable(Protocol):
    def read(self, size: int | None = ..., /) -> bytes: ...


@dataclass
class Read:
    """What the paths gave: the letters, and what was left out."""

    letters: list[CorpusLetter] = field(default_factory=list)
    too_large: int = 0  # over max_size: skipped
    empty: int = 0
    size: int = 0  # bytes of the letters kept

    def add(self, letter: CorpusLetter, limit: int, max_bytes: int) -> None:
        """Keep a letter; InvalidInput past ``limit`` letters or ``max_bytes`` bytes."""
        if len(self.letters) >= limit:
            raise InvalidInput(f"more than {limit} {letter.label} letters: train on fewer")
        if self.size + len(letter.raw) > max_bytes:
            raise InvalidInput(
                f"the {letter.label} letters hold more than {max_bytes} bytes: train on fewer"
            )
        self.letters.append(letter)
        self.size += len(letter.raw)

    def as_dict(self) -> dict[str, int]:
        return {"letters": len(self.letters), "too_large": self.too_large, "empty": self.empty}


def kind_of(path: Path) -> str:
    """maildir, mbox, directory or letter; InvalidInput when the path does not exist."""
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or directory")
    if path.is_dir():
        if all((path / sub).is_dir() for sub in ("cur", "new")):
            return "maildir"
        return "directory"
    if not path.is_file():
        raise InvalidInput(f"{path}: not a file nor a directory")
    with path.open("rb") as f:
        head = f.read(5)
    return "mbox" if head == b"From " else "letter"


def bounded(f: Readable, max_size: int) -> bytes | None:
    """The file's bytes, or None when it holds more than ``max_size`` (read no further)."""
    data = f.read(max_size + 1)
    return None if len(data) > max_size else data


def raw_files(path: Path) -> Iterator[tuple[str, Readable]]:
    """(a name, an open file) for every letter at ``path``; InvalidInput when it is missing."""
    kind = kind_of(path)
    if kind == "maildir":
        box = mailbox.Maildir(str(path), factory=None, create=False)
        for key in sorted(box.iterkeys()):
            with box.get_file(key) as f:
                yield f"{path}/{key}", f
    elif kind == "mbox":
        mbox = mailbox.mbox(str(path), factory=None, create=False)
        try:
            for key in mbox.iterkeys():
                with mbox.get_file(key) as f:
                    yield f"{path}#{key}", f
        finally:
            mbox.close()
    elif kind == "directory":
        for file in sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES):
            if file.is_file():
                with file.open("rb") as f:
                    yield str(file), f
    else:
        with path.open("rb") as f:
            yield str(path), f


def read(
    paths: Iterable[Path],
    label: Label,
    *,
    max_size: int,
    limit: int = MAX_LETTERS,
    max_bytes: int = MAX_BYTES,
) -> Read:
    """The letters of every path, labelled ``label`` (group ``label``); dated by the mbox From
    line a file may start with, else by their Date header (neither: the replay keeps them in
    the order read)."""
    out = Read()
    for path in paths:
        for name, f in raw_files(path):
            raw = bounded(f, max_size)
            if raw is None:
                out.too_large += 1
                continue
            if not raw.strip():
                out.empty += 1
                continue
            # a letter kept with its mbox From line (as the public corpus's files are) arrived then
            letter = CorpusLetter(label, name, raw, label, header_date(raw), envelope_date(raw))
            out.add(letter, limit, max_bytes)
    return out
