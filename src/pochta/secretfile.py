"""A secret kept in a file of the data directory (``service-token``, ``web-secret``,
``guard-secret``): made once by whichever process needs it first, the same for all after.

    value = read_or_create(data_dir / "web-secret")

The value is written whole to a temporary file beside it (mode 0600), fsynced, then
``os.link``-ed to its name: the name appears only with the whole value behind it, and the
link fails when the name exists, so of several processes starting at once one wins and the
others read the winner's value. A reader never sees an empty or half-written file, and a
crash leaves at most a temporary file, never an empty secret. A file that holds no usable
secret (empty, too short, not text) is refused with a ConfigError that names it (never its
content).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from pochta.errors import ConfigError

MIN_LENGTH = 16  # characters of a secret, given in settings or read from its file


def read_or_create(path: Path) -> str:
    """The secret in ``path``; a new random one, kept there, when there is no such file."""
    try:
        return read(path)
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(32)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return read(path)  # another process made it first: its value, for everyone
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    _fsync_dir(path.parent)
    return value


def read(path: Path) -> str:
    """The secret in ``path`` (FileNotFoundError when there is none); ConfigError when the
    file holds no usable secret."""
    try:
        value = path.read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError:
        value = ""
    if len(value) < MIN_LENGTH:
        raise ConfigError(
            f"{path} holds no usable secret (empty, not text, or shorter than {MIN_LENGTH}"
            " characters); delete it to have a new one made, or write one into it"
        )
    return value


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
