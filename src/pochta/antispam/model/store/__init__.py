"""Model versions and the pointer to the live one, kept where every loader reads them.

``pochta model train`` writes a NEW version (its files: ``model.cbm``, ``model.json``,
``tokens.json`` and ``figures.json``, the cross-validated figures it printed); nothing is
live until ``pochta model promote VERSION``; ``pochta model rollback`` makes live again the
version promoted before it (or, past the first, the model shipped with pochta). Every loader
checks the pointer every ``antispam.model_check_seconds`` and switches (:class:`LiveModel`).

A store keeps versions and the promotions in order; the last promotion is the live version.

    ModelStore                    the Protocol; its engines beside this file:
    ├── memory.MemoryModelStore         the fake, for tests
    ├── directory.DirectoryModelStore   <data_dir>/models/<version>/<file>, models/live.json
    └── postgres.PostgresModelStore     with [postgres]: every machine's loaders switch together
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pochta.antispam.model import booster
from pochta.errors import ConfigError, InvalidInput, NotFound, StorageError

MODELS_DIR = "models"  # the directory store's folder under data_dir
FILES = ("model.cbm", "model.json", "tokens.json", "figures.json")
"""The files a version may hold (model.cbm and model.json are required)."""
MAX_FILE = 64 * 2**20  # a model file larger than this is refused (the shipped one: ~1 MB)
MAX_VERSIONS = 1000  # versions kept at most; the operator removes old ones by hand
log = logging.getLogger("pochta.antispam")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}")


def check_version(version: str) -> str:
    """A version name as a store accepts it (a file name on every system), else InvalidInput."""
    if not _VERSION.fullmatch(version):
        raise InvalidInput(
            f"{version[:80]!r} is not a model version: 1-64 letters, digits, '.', '_', '-'"
        )
    return version


def is_version(name: str) -> bool:
    """Whether ``name`` is a version name (``check_version`` without the error)."""
    return _VERSION.fullmatch(name) is not None


def check_files(files: Mapping[str, bytes]) -> None:
    unknown = sorted(set(files) - set(FILES))
    if unknown:
        raise InvalidInput(f"a model version holds only {', '.join(FILES)}; not {unknown[0]!r}")
    for name in ("model.cbm", "model.json"):
        if name not in files:
            raise InvalidInput(f"a model version needs {name}")
    for name, body in files.items():
        if len(body) > MAX_FILE:
            raise InvalidInput(f"{name} is {len(body)} bytes; at most {MAX_FILE}")


class ModelStore(Protocol):
    """Versions of the model and the promotions. Every method may raise StorageError."""

    def put(self, version: str, files: Mapping[str, bytes], created: float) -> None:
        """Keep a new version; InvalidInput when it exists or its files are wrong."""
        ...

    def files(self, version: str) -> dict[str, bytes]:
        """A version's files; NotFound when there is no such version."""
        ...

    def versions(self) -> list[tuple[str, float]]:
        """(version, when it was written), oldest first."""
        ...

    def promotions(self) -> list[str]:
        """The versions promoted and not rolled back, oldest first: the last is live."""
        ...

    def promote(self, version: str) -> None:
        """Make ``version`` live; NotFound when there is no such version."""
        ...

    def rollback(self) -> str | None:
        """Undo the last promotion; the version live now (None: the shipped model)."""
        ...

    def close(self) -> None: ...


def live(store: ModelStore) -> str | None:
    done = store.promotions()
    return done[-1] if done else None


# -- a model as a version's files, and back ---------------------------------------------------


def files_of(model: booster.Model, figures: Mapping[str, Any]) -> dict[str, bytes]:
    """The files of a version: the model as :meth:`Model.save` writes it, and its figures."""
    with tempfile.TemporaryDirectory(prefix="pochta-model-") as tmp:
        folder = Path(tmp)
        model.save(folder)
        files = {n: (folder / n).read_bytes() for n in FILES if (folder / n).is_file()}
    files["figures.json"] = json.dumps(figures, indent=1, ensure_ascii=False).encode()
    return files


def model_of(files: Mapping[str, bytes]) -> booster.Model:
    """The model a version's files hold."""
    with tempfile.TemporaryDirectory(prefix="pochta-model-") as tmp:
        folder = Path(tmp)
        for name, body in files.items():
            (folder / name).write_bytes(body)
        model = booster.load(folder)
    if model is None:  # check_files keeps both files in every version
        raise StorageError("a model version without model.cbm or model.json")
    return model


def figures_of(files: Mapping[str, bytes]) -> dict[str, Any]:
    body = files.get("figures.json")
    if not body:
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def listing(store: ModelStore) -> list[dict[str, Any]]:
    """Every version, oldest first: its name, when it was written, whether it is live, and the
    figures it was trained with (``pochta model list``, the admin pages)."""
    now_live = live(store)
    return [
        {
            "version": v,
            "created": created,
            "live": v == now_live,
            "figures": figures_of(store.files(v)),
        }
        for v, created in store.versions()
    ]


def new_version(now: float) -> str:
    """A version name from the time it is written (UTC), sortable."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))


@dataclass
class Switched:
    version: str | None  # None: the model the loader was started with
    model: booster.Model | None


class LiveModel:
    """The model a loader uses, following the store's pointer: :meth:`check` (every
    ``interval`` seconds at most) reads the pointer and, when it moved, loads the version and
    calls ``on_switch``; :attr:`version` changes once that returns (a switch that raised is
    tried again at the next check). A version that cannot be loaded leaves the current model
    in place."""

    def __init__(
        self,
        store: ModelStore,
        fallback: booster.Model | None,
        on_switch: Callable[[Switched], None],
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.fallback = fallback
        self.on_switch = on_switch
        self.interval = interval
        self.clock = clock
        self.version: str | None = None
        self.error: str | None = None
        self._checked = -float("inf")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def initial(self) -> booster.Model | None:
        """The live version's model, read once at the start; the fallback when none is live
        or the live one cannot be loaded (``error`` says why: the loader still starts)."""
        self._checked = self.clock()
        wanted = live(self.store)
        if wanted is None:
            return self.fallback
        try:
            model = model_of(self.store.files(wanted))
        except (NotFound, ConfigError) as exc:
            self.error = f"model version {wanted}: {exc.message}"
            log.error("cannot load the live model: %s; using the shipped one", self.error)
            return self.fallback
        self.version = wanted
        return model

    def check(self, *, force: bool = False) -> bool:
        """Switch when the pointer moved; whether it switched."""
        with self._lock:
            now = self.clock()
            if not force and now - self._checked < self.interval:
                return False
            self._checked = now
            try:
                wanted = live(self.store)
                if wanted == self.version:
                    return False
                model = self.fallback if wanted is None else model_of(self.store.files(wanted))
            except (StorageError, NotFound, ConfigError) as exc:
                self.error = exc.message
                return False
            self.on_switch(Switched(wanted, model))
            self.error = None
            self.version = wanted  # after the switch: the version is the model in use
            return True

    def start(self) -> None:
        """Check the pointer every ``interval`` seconds in a thread, until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="pochta-live-model", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check(force=True)
            except Exception as exc:  # a model that cannot load must not stop the checks
                self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
