"""One layout for every backend (issue 31; docs/glossary.md, *Backend layouts*): a port's engines
live in one folder, one file per engine, ``memory.py`` / ``sqlite.py`` / ``postgres.py`` /
``redis.py`` (an engine that is none of these is named for itself: ``directory.py``,
``mapped.py``, ``local.py``, ``webdav.py``), so "where is the PostgreSQL code for X" has one
answer: ``X/postgres.py``. Read from the source with ``ast``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pochta"

ENGINES = {"memory", "sqlite", "postgres", "redis"}
"""The engine files' names."""
ENGINE_WORD = re.compile(r"sqlite|postgres|redis|(^|_)pg")
"""A module or folder named for an engine."""
SHARED = {"postgres", "redisconn", "sqlitedb"}
"""The connection helpers every engine of a kind uses (``pochta/postgres/``,
``pochta/redisconn/``, ``pochta/sqlitedb.py``): no port's engines."""
PORT_PARTS = {"history"}
"""SPEC §1's parts that are one port: their engines sit in the part's own folder."""
CLASS_ENGINE = {"Memory": "memory", "SQLite": "sqlite", "Sqlite": "sqlite"}
CLASS_ENGINE |= {"Postgres": "postgres", "Redis": "redis"}
"""A class named for an engine (after an ``Async`` prefix) lives in that engine's file."""
SETTINGS = "config.py"
"""Where ``RedisSettings`` and ``PostgresSettings`` are: settings, no engine."""


def _shared(rel: Path) -> bool:
    return rel.parts[0].removesuffix(".py") in SHARED


def misplaced_modules(root: Path) -> list[str]:
    """Modules and folders that break the layout: a name with an engine in it that is not an
    engine file (``pairs_postgres.py``, ``sqlitelock.py``, ``pgstore.py``), and an engine file
    among a part's other modules rather than in a port's folder (``mailbox/sqlite.py``)."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if _shared(rel):
            continue
        names = [*rel.parts[:-1], path.stem]
        if any(ENGINE_WORD.search(n) and n not in ENGINES for n in names):
            wrong.append(f"{rel.as_posix()}: named for an engine, not one of {sorted(ENGINES)}")
        elif path.stem in ENGINES and len(rel.parts) < 3 and rel.parts[0] not in PORT_PARTS:
            wrong.append(f"{rel.as_posix()}: an engine outside a port's folder")
    return wrong


def misplaced_classes(root: Path) -> list[str]:
    """Classes named for an engine (``MemoryFence``, ``AsyncRedisLockBackend``) that are not in
    that engine's file."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if _shared(rel) or rel.as_posix() == SETTINGS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            name = node.name.removeprefix("Async")
            for prefix, engine in CLASS_ENGINE.items():
                named = name.startswith(prefix) and name[len(prefix) :][:1].isupper()
                if named and path.stem != engine:
                    wrong.append(f"{rel.as_posix()}: {node.name} (belongs in {engine}.py)")
    return wrong


def test_every_port_keeps_its_engines_in_one_folder() -> None:
    assert misplaced_modules(PACKAGE) == []


def test_every_engine_class_is_in_its_engine_file() -> None:
    assert misplaced_classes(PACKAGE) == []


def test_the_layout_check_sees_the_old_layouts(tmp_path: Path) -> None:
    files = {
        "blobs/pairs_postgres.py": "",  # an engine-suffixed sibling
        "antispam/model/pgstore.py": "",
        "guard/backends/sqlitelock.py": "class SqliteFence: ...\n",  # engine and port in a name
        "mailbox/sqlite.py": "",  # an engine among the part's other modules
        "guard/fence.py": "class MemoryFence: ...\n",  # a fake outside its port's folder
        "blobs/filedb/postgres.py": "class PostgresFileDB: ...\n",  # the layout: all fine
        "history/sqlite.py": "class SQLiteHistory: ...\n",
        "postgres/database.py": "class Postgres: ...\n",
        "sqlitedb.py": "class SQLiteDatabase: ...\n",
        "config.py": "class RedisSettings: ...\n",
        "guard/lock/redis.py": "class AsyncRedisLockBackend: ...\nclass RedisFence: ...\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert [w.split(":")[0] for w in misplaced_modules(tmp_path)] == [
        "antispam/model/pgstore.py",
        "blobs/pairs_postgres.py",
        "guard/backends/sqlitelock.py",
        "mailbox/sqlite.py",
    ]
    assert misplaced_classes(tmp_path) == [
        "guard/backends/sqlitelock.py: SqliteFence (belongs in sqlite.py)",
        "guard/fence.py: MemoryFence (belongs in memory.py)",
    ]
