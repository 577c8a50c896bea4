"""Every error pochta raises on purpose.

    PochtaError                      root; never seen by a user as a traceback
    ├── InvalidInput                 the caller's request is malformed (HTTP 400/422, CLI exit 2)
    │   ├── BadKey                   not 64 lowercase hex characters
    │   ├── BadMagic                 magic 0 or outside 1..2**32-1
    │   ├── ContentMismatch          uploaded bytes do not hash to the key given
    │   └── RangeNotSatisfiable      a byte range outside the file (HTTP 416)
    ├── NotFound                     (HTTP 404, CLI exit 3)
    │   ├── BlobNotFound             no live record for a key (inc, get, dec of an unknown key)
    │   └── PairNotFound
    ├── IntegrityError               stored bytes differ from what a letter expects (409, exit 4)
    ├── StorageError                 a disk or node failed (HTTP 503/507, CLI exit 5)
    │   ├── NoWritablePair           no pair passed the probe or had room
    │   └── DiskError                one disk refused a read or a write
    │       └── MissingFile          the file is not on that disk
    └── ConfigError                  settings or the data directory are unusable (CLI exit 6)

Foreign errors (OSError, sqlite3.Error, httpx errors) are translated once, at the adapter
that met them, with ``raise ... from exc``.
"""

from __future__ import annotations


class PochtaError(Exception):
    """Root of pochta's errors. ``code`` is a stable machine-readable name."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(PochtaError):
    code = "invalid_input"


class BadKey(InvalidInput):
    code = "bad_key"


class BadMagic(InvalidInput):
    code = "bad_magic"


class ContentMismatch(InvalidInput):
    code = "content_mismatch"


class RangeNotSatisfiable(InvalidInput):
    code = "range_not_satisfiable"


class NotFound(PochtaError):
    code = "not_found"


class BlobNotFound(NotFound):
    code = "blob_not_found"


class PairNotFound(NotFound):
    code = "pair_not_found"


class IntegrityError(PochtaError):
    code = "integrity"


class StorageError(PochtaError):
    code = "storage"


class NoWritablePair(StorageError):
    code = "no_writable_pair"


class DiskError(StorageError):
    code = "disk"


class MissingFile(DiskError):
    code = "missing_file"


class ConfigError(PochtaError):
    code = "config"
