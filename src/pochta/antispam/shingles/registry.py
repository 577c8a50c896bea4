"""Shingles (seed 002): a 64-bit hash of a normalized piece of a letter, with a type number.

The registry below is stable: a number, once given, keeps its meaning (counters are stored by
it). 8, 14, 15, 30, 31, 42 and 62 are the seed's own numbers.

    type name                        value (normalized, see ``pochta.mime.normalize``)
    ---- --------------------------- ---------------------------------------------------------
       8 subject                     Subject as text, Re:/Fwd:/Fw:/Ответ:... prefixes removed
      10 body_text                   the body's words (letters only: no digits, URLs, e-mails)
      11 body_minhash                near-duplicate: of the body's 4-word runs, the one whose
                                     CRC-32 is least (letters sharing most runs share it)
      14 from_address                From address, local@domain
      15 sender_ip                   the client's IP (envelope; else the top Received [ip])
      16 sender_network              its /24 (IPv4) or /48 (IPv6)
      17 from_domain                 registrable domain of the From address
      18 display_name                From display name as text
      19 return_path_domain          registrable domain of the envelope sender / Return-Path
      20 message_id_domain           the domain after "@" in Message-ID
      21 link_host                   host of each link (http, https, ftp; at most 10 links)
      22 link_url                    each link: scheme://host[:port]/path, no query/fragment
      23 link_domain                 registrable domain of each link's host
      30 sender_recipient            paired: "<sender> <recipient>" for each recipient
      31 sender_recipients_unique    unique of 30: "<sender>": distinct recipients per sender
      32 sender_network_pair         paired: "<sender> <sender_network>"
      33 sender_networks_unique      unique of 32: "<sender>": distinct networks per sender
      42 attachment_name             each attachment's file name as text
      62 attachment_checksum         each attachment's SHA-256 (hex, of the decoded content:
                                     the blob store's key)

"sender" in 30..33 is the envelope sender, else the From address. Recipients are the envelope
recipients, else the To and Cc addresses (at most 50).

Hash: the first 8 bytes of BLAKE2b (person ``pochta-shingle``) of the value's UTF-8, read as
a big-endian unsigned integer; shown as 16 hex digits.

Extraction (:mod:`pochta.antispam.shingles.extract`) reads the parsed letter and never raises: a
malformed header or part gives fewer shingles, not an error.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from pochta.antispam.shingles.counters import Ref


class ShingleType(enum.IntEnum):
    SUBJECT = 8
    BODY_TEXT = 10
    BODY_MINHASH = 11
    FROM_ADDRESS = 14
    SENDER_IP = 15
    SENDER_NETWORK = 16
    FROM_DOMAIN = 17
    DISPLAY_NAME = 18
    RETURN_PATH_DOMAIN = 19
    MESSAGE_ID_DOMAIN = 20
    LINK_HOST = 21
    LINK_URL = 22
    LINK_DOMAIN = 23
    SENDER_RECIPIENT = 30
    SENDER_RECIPIENTS_UNIQUE = 31
    SENDER_NETWORK_PAIR = 32
    SENDER_NETWORKS_UNIQUE = 33
    ATTACHMENT_NAME = 42
    ATTACHMENT_CHECKSUM = 62

    @property
    def label(self) -> str:
        return self.name.lower()


PAIRED = {
    ShingleType.SENDER_RECIPIENT: ShingleType.SENDER_RECIPIENTS_UNIQUE,
    ShingleType.SENDER_NETWORK_PAIR: ShingleType.SENDER_NETWORKS_UNIQUE,
}
"""Paired type -> the type of its unique."""


def type_name(number: int) -> str:
    try:
        return ShingleType(number).label
    except ValueError:
        return f"type_{number}"


_HASH = hashlib.blake2b(digest_size=8, person=b"pochta-shingle")
"""The state every shingle's hash starts from (parameters read): a copy of it hashes a value,
the same digest as a new ``blake2b(value, digest_size=8, person=...)``, ~2x cheaper than
building one from its keyword arguments."""


def shingle_hash(value: str) -> int:
    h = _HASH.copy()
    h.update(value.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "big")


@dataclass(frozen=True, slots=True)
class Shingle:
    type: ShingleType
    value: str
    hash: int
    unique: Shingle | None = None

    @classmethod
    def of(cls, type_: ShingleType, value: str, unique: Shingle | None = None) -> Shingle:
        return cls(type_, value, shingle_hash(value), unique)

    @property
    def hex(self) -> str:
        return f"{self.hash:016x}"

    @property
    def ref(self) -> Ref:
        return Ref(int(self.type), self.hash, None if self.unique is None else self.unique.ref)


UNIQUE_TYPES = frozenset(PAIRED.values())


def update_refs(shingles: Iterable[Shingle]) -> list[Ref]:
    """What an update of a letter's counters takes: every shingle but the uniques, which
    count through their pairs (one per distinct pair and bucket)."""
    return [s.ref for s in shingles if s.type not in UNIQUE_TYPES]


def query_refs(shingles: Iterable[Shingle]) -> list[Ref]:
    return [s.ref for s in shingles]
