"""Keys, magic numbers and disk paths: pure functions, no I/O."""

from __future__ import annotations

import hashlib
import random
import re

from pochta.errors import BadKey, BadMagic, InvalidInput
from pochta.types import Key, Magic, Op

MAGIC_MOD = 2**32
_KEY_RE = re.compile(r"[0-9a-f]{64}")


def parse_key(text: str) -> Key:
    """Accept a SHA-256 key: exactly 64 lowercase hex characters."""
    if not isinstance(text, str) or not _KEY_RE.fullmatch(text):
        shown = text if isinstance(text, str) and len(text) <= 80 else f"{str(text)[:77]}..."
        raise BadKey(f"malformed key {shown!r}: expected 64 lowercase hex characters (SHA-256)")
    return text


def key_of(data: bytes) -> Key:
    return hashlib.sha256(data).hexdigest()


def parse_magic(value: object) -> Magic:
    """Accept a magic: an integer in 1..2**32-1 (0 is what a balanced record sums to)."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 0)
        except ValueError:
            raise BadMagic(f"magic {value!r} is not an integer") from None
    if not 0 < value < MAGIC_MOD:
        raise BadMagic(f"magic {value} is out of range: it must be in 1..{MAGIC_MOD - 1}")
    return value


MAX_OP = 32


def parse_op(value: object) -> Op:
    """Accept an operation id: 1 to 32 bytes."""
    if not isinstance(value, bytes) or not 0 < len(value) <= MAX_OP:
        raise InvalidInput(f"an operation id is 1 to {MAX_OP} bytes, not {value!r:.80}")
    return value


def random_magic(rng: random.Random | None = None) -> Magic:
    """A letter's magic for one file: uniform over 1..2**32-1."""
    return (rng or _system_random).randrange(1, MAGIC_MOD)


def add_magic(total: Magic, magic: Magic) -> Magic:
    return (total + magic) % MAGIC_MOD


def sub_magic(total: Magic, magic: Magic) -> Magic:
    return (total - magic) % MAGIC_MOD


def master_index(key: Key) -> int:
    """Which disk of a pair is the master for this key: the first bit of the key."""
    return int(key[0], 16) >> 3


def blob_path(key: Key) -> str:
    """Where a key lives on a disk: ``ab/cd/<key>``."""
    return f"{key[0:2]}/{key[2:4]}/{key}"


_system_random = random.SystemRandom()
