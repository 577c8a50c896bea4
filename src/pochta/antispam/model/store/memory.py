"""Model versions in memory: the fake, for tests (``pochta.antispam.model.store``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from pochta.antispam.model.store import MAX_VERSIONS, check_files, check_version
from pochta.errors import InvalidInput, NotFound


class MemoryModelStore:
    """The in-memory fake: the same behaviour, nothing kept."""

    def __init__(self) -> None:
        self._files: dict[str, dict[str, bytes]] = {}
        self._created: dict[str, float] = {}
        self._promoted: list[str] = []
        self._lock = threading.Lock()

    def put(self, version: str, files: Mapping[str, bytes], created: float) -> None:
        check_version(version)
        check_files(files)
        with self._lock:
            if version in self._files:
                raise InvalidInput(f"model version {version} exists")
            if len(self._files) >= MAX_VERSIONS:
                raise InvalidInput(f"{MAX_VERSIONS} model versions kept: remove old ones")
            self._files[version] = dict(files)
            self._created[version] = created

    def files(self, version: str) -> dict[str, bytes]:
        with self._lock:
            if version not in self._files:
                raise NotFound(f"no model version {version}")
            return dict(self._files[version])

    def versions(self) -> list[tuple[str, float]]:
        with self._lock:
            return sorted(self._created.items(), key=lambda kv: (kv[1], kv[0]))

    def promotions(self) -> list[str]:
        with self._lock:
            return list(self._promoted)

    def promote(self, version: str) -> None:
        with self._lock:
            if version not in self._files:
                raise NotFound(f"no model version {version}")
            self._promoted.append(version)

    def rollback(self) -> str | None:
        with self._lock:
            if self._promoted:
                self._promoted.pop()
            return self._promoted[-1] if self._promoted else None

    def close(self) -> None:
        pass
