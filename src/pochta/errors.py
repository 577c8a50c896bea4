"""Every error pochta raises on purpose.

    PochtaError                      root; never seen by a user as a traceback
    ├── InvalidInput                 the caller's request is malformed (HTTP 400/422, CLI exit 2)
    │   ├── BadKey                   not 64 lowercase hex characters
    │   ├── BadMagic                 magic 0 or outside 1..2**32-1
    │   ├── ContentMismatch          uploaded bytes do not hash to the key given
    │   ├── RangeNotSatisfiable      a byte range outside the file (HTTP 416)
    │   ├── AlreadyExists            a user or folder of that name exists (HTTP 409)
    │   └── TooLarge                 a letter over the size limit (HTTP 413, SMTP 552)
    ├── NotFound                     (HTTP 404, CLI exit 3)
    │   ├── BlobNotFound             no live record for a key (inc, get, dec of an unknown key)
    │   ├── PairNotFound
    │   ├── UserNotFound
    │   ├── FolderNotFound
    │   └── MessageNotFound          also someone else's letter: it is not there for you
    ├── AuthError                    (HTTP 401/403, CLI exit 7)
    │   ├── InvalidCredentials       wrong e-mail or password: the same answer for both
    │   ├── ResetRequired            the password leaked; it must be changed first (HTTP 403)
    │   └── TlsRequired              a password sent in clear off the networks allowed (HTTP 403)
    ├── RateLimited                  too many attempts; ``retry_after`` seconds (HTTP 429)
    ├── LockError                    a lease was not taken or not kept (HTTP 409)
    │   ├── LockTimeout              another holder kept the lock for the whole timeout
    │   ├── LeaseLost                the lease expired or was taken while its holder worked
    │   └── StaleToken               a write carried an older fencing token than one seen
    ├── IntegrityError               stored bytes differ from what a letter expects (409, exit 4)
    ├── StorageError                 a disk or node failed (HTTP 503/507, CLI exit 5)
    │   ├── NoWritablePair           no pair passed the probe or had room
    │   ├── GuardUnavailable         the lock / rate-limit store (Redis, SQLite) did not answer
    │   └── DiskError                one disk refused a read or a write
    │       └── MissingFile          the file is not on that disk
    ├── CpuPoolError                 the CPU pool could not run a task (HTTP 503, SMTP 451)
    │   ├── CpuPoolTimeout           the task overran its hard deadline: its process was killed
    │   ├── CpuPoolProcessDied       the pool process exited while it ran the task (crash, OOM)
    │   └── CpuPoolUnavailable       the pool is closed, cannot start a process, or is full
    ├── Overloaded                   the server holds all it may in memory now (HTTP 503)
    ├── ConfigError                  settings or the data directory are unusable (CLI exit 6)
    └── CorpusUnavailable            the public test corpus could not be fetched or verified

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


class AlreadyExists(InvalidInput):
    code = "already_exists"


class TooLarge(InvalidInput):
    code = "too_large"


class NotFound(PochtaError):
    code = "not_found"


class BlobNotFound(NotFound):
    code = "blob_not_found"


class PairNotFound(NotFound):
    code = "pair_not_found"


class UserNotFound(NotFound):
    code = "user_not_found"


class FolderNotFound(NotFound):
    code = "folder_not_found"


class MessageNotFound(NotFound):
    code = "message_not_found"


class AuthError(PochtaError):
    code = "unauthorized"


class InvalidCredentials(AuthError):
    code = "invalid_credentials"


class ResetRequired(AuthError):
    code = "password_reset_required"


class TlsRequired(AuthError):
    code = "tls_required"


class RateLimited(PochtaError):
    code = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LockError(PochtaError):
    code = "lock"


class LockTimeout(LockError):
    code = "lock_timeout"


class LeaseLost(LockError):
    code = "lease_lost"


class StaleToken(LockError):
    code = "stale_token"


class IntegrityError(PochtaError):
    code = "integrity"


class StorageError(PochtaError):
    code = "storage"


class NoWritablePair(StorageError):
    code = "no_writable_pair"


class GuardUnavailable(StorageError):
    code = "guard_unavailable"


class DiskError(StorageError):
    code = "disk"


class MissingFile(DiskError):
    code = "missing_file"


class CpuPoolError(PochtaError):
    """The CPU pool (``pochta.cpupool``) could not run a task; an exception that the task
    itself raised reaches its caller as itself, not as one of these. (Called ``WorkerError``
    and its kin before issue 31; their ``code`` strings, which clients see, are unchanged.)"""

    code = "worker"


class CpuPoolTimeout(CpuPoolError):
    """The task ran past its hard deadline; its pool process was killed and replaced."""

    code = "worker_timeout"


class CpuPoolProcessDied(CpuPoolError):
    """The pool process exited while it ran the task; it has been replaced."""

    code = "worker_died"


class CpuPoolUnavailable(CpuPoolError):
    """No pool process will take the task: the pool is closed or not started, a process could
    not be started, or ``max_pending`` tasks are already waiting (back-pressure)."""

    code = "workers_unavailable"


class Overloaded(PochtaError):
    """The server's budget of bytes held for clients (``memory_budget``) is spent: the
    request would need more memory; try again shortly."""

    code = "overloaded"


class ConfigError(PochtaError):
    code = "config"


class CorpusUnavailable(PochtaError):
    """The corpus could not be fetched or failed verification."""

    code = "corpus_unavailable"
