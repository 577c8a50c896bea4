"""What a Valkyrie pass did: its counts (``Counts``, summed into the saved totals) and the
report of one pass over one disk (``PassReport``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class Counts:
    checked: int = 0  # files looked at
    verified: int = 0  # live files re-hashed
    repaired: int = 0  # copies replaced, recreated or restored from quarantine
    quarantined: int = 0  # deleted files moved into quarantine
    purged: int = 0  # quarantined files removed after their period
    orphans: int = 0  # files without a record, quarantined
    strays: int = 0  # copies on a wrong pair, quarantined
    tmp_removed: int = 0
    space1_dropped: int = 0
    errors: int = 0
    bytes: int = 0  # bytes read

    def add(self, other: Counts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


COUNT_NAMES = [f.name for f in fields(Counts)]


@dataclass(slots=True)
class PassReport:
    disk: str
    pair: int
    index: int
    counts: Counts = field(default_factory=Counts)
    complete: bool = False  # reached the end of the disk
    busy: bool = False  # another Valkyrie holds this disk
    problems: list[str] = field(default_factory=list)  # the first few errors, one line each

    def as_dict(self) -> dict[str, Any]:
        return {
            "disk": self.disk,
            "pair": self.pair,
            "index": self.index,
            "complete": self.complete,
            "busy": self.busy,
            **self.counts.as_dict(),
            "problems": self.problems,
        }
