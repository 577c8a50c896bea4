"""Model versions in a directory, ``<data_dir>/models`` (``pochta.antispam.model.store``):
the store of one machine, without [postgres]."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from pochta.antispam.model.store import (
    FILES,
    MAX_VERSIONS,
    check_files,
    check_version,
    is_version,
)
from pochta.errors import InvalidInput, NotFound, StorageError


class DirectoryModelStore:
    """``<root>/<version>/<file>`` and ``<root>/live.json`` (the promotions), each written to a
    temporary name and renamed: a loader never reads half a file."""

    POINTER = "live.json"

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    def put(self, version: str, files: Mapping[str, bytes], created: float) -> None:
        check_version(version)
        check_files(files)
        with self._lock:
            target = self.root / version
            if target.exists():
                raise InvalidInput(f"model version {version} exists")
            if len(self._names()) >= MAX_VERSIONS:
                raise InvalidInput(f"{MAX_VERSIONS} model versions kept: remove old ones")
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=self.root))
                for name, body in files.items():
                    (tmp / name).write_bytes(body)
                (tmp / ".created").write_text(repr(created))
                tmp.rename(target)
            except OSError as exc:
                raise StorageError(f"cannot write model version {version}: {exc}") from exc

    def files(self, version: str) -> dict[str, bytes]:
        check_version(version)
        folder = self.root / version
        if not (folder / "model.cbm").is_file():
            raise NotFound(f"no model version {version}")
        try:
            return {n: (folder / n).read_bytes() for n in FILES if (folder / n).is_file()}
        except OSError as exc:
            raise StorageError(f"cannot read model version {version}: {exc}") from exc

    def _names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return [
            p.name
            for p in self.root.iterdir()
            if is_version(p.name) and (p / "model.cbm").is_file()
        ]

    def versions(self) -> list[tuple[str, float]]:
        out = []
        for name in self._names():
            try:
                created = float((self.root / name / ".created").read_text())
            except (OSError, ValueError):
                created = 0.0
            out.append((name, created))
        return sorted(out, key=lambda kv: (kv[1], kv[0]))

    def promotions(self) -> list[str]:
        path = self.root / self.POINTER
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        return [str(v) for v in data.get("promoted", [])]

    def _write_promotions(self, promoted: list[str]) -> None:
        path = self.root / self.POINTER
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"promoted": promoted}) + "\n")
            tmp.replace(path)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}") from exc

    def promote(self, version: str) -> None:
        with self._lock:
            if version not in self._names():
                raise NotFound(f"no model version {version}")
            self._write_promotions([*self.promotions(), version])

    def rollback(self) -> str | None:
        with self._lock:
            promoted = self.promotions()
            if promoted:
                promoted.pop()
                self._write_promotions(promoted)
            return promoted[-1] if promoted else None

    def close(self) -> None:
        pass
