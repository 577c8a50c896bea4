"""Valkyrie's file names: what a file on a disk is, from its relative name alone
(``parse_name``), and the name a file gets in quarantine (``quarantine_name``)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from pochta.blobs.keys import blob_path
from pochta.types import Key

QUARANTINE_MARK = ".deleted."


class Kind(enum.Enum):
    BLOB = "blob"
    QUARANTINE = "quarantine"
    TMP = "tmp"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Name:
    kind: Kind
    key: Key | None = None
    ts: int | None = None  # when quarantined (QUARANTINE only)


_BLOB_RE = re.compile(r"([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{64})(?:\.deleted\.(\d+))?")


def parse_name(name: str) -> Name:
    """What a file on a disk is, from its relative name alone."""
    if name.startswith("tmp/") and name.endswith(".part"):
        return Name(Kind.TMP)
    m = _BLOB_RE.fullmatch(name)
    if m is None or m[3][:2] != m[1] or m[3][2:4] != m[2]:
        return Name(Kind.OTHER)
    if m[4] is not None:
        return Name(Kind.QUARANTINE, m[3], int(m[4]))
    return Name(Kind.BLOB, m[3])


def quarantine_name(key: Key, now: float) -> str:
    return f"{blob_path(key)}{QUARANTINE_MARK}{int(now)}"
