"""Import rules, read from the source with ``ast``: no import runs up SPEC §1's layers
(``LAYERS``); the runtime (``pochta``) never imports the model factory (``pochta_factory``)
except inside a CLI command; no package has an import circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
FACTORY = "pochta_factory"


def _modules(package: str) -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in (SRC / package).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _imports(name: str, path: Path, is_package: bool, known: set[str]) -> list[tuple[str, int]]:
    """(module imported, line) for every import in the file, top level or inside a function;
    ``from package import submodule`` is an import of the submodule."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.append((sub if sub in known else module, node.lineno))
    return found


def _graph(package: str) -> dict[str, set[str]]:
    modules = _modules(package)
    known = set(modules)
    return {
        name: {m for m, _ in _imports(name, path, is_pkg, known) if m in known and m != name}
        for name, (path, is_pkg) in modules.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_runtime_imports_the_factory_only_inside_cli_commands() -> None:
    modules = _modules("pochta")
    known = set(modules)
    wrong = []
    for name, (path, is_package) in sorted(modules.items()):
        tree = ast.parse(path.read_text())
        top_level = {n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
        for module, line in _imports(name, path, is_package, known):
            if module.split(".")[0] != FACTORY:
                continue
            if not name.startswith("pochta.cli.") or line in top_level:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert wrong == []


def test_no_import_circle_in_the_runtime_nor_in_the_factory() -> None:
    assert _circles(_graph("pochta")) == []
    assert _circles(_graph(FACTORY)) == []


def test_the_factory_is_a_package_of_its_own_that_imports_the_runtime() -> None:
    graph = _graph(FACTORY)
    modules = _modules(FACTORY)
    uses_runtime = {
        m
        for name, (path, is_pkg) in modules.items()
        for m, _ in _imports(name, path, is_pkg, set(modules))
        if m.split(".")[0] == "pochta"
    }
    assert f"{FACTORY}.training" in graph
    assert "pochta.antispam.verdict" in uses_runtime


def test_loading_the_server_and_the_cli_loads_no_factory_module() -> None:
    code = (
        "import sys, pochta.app, pochta.cli, pochta.cpupool; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] == {FACTORY!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


LAYERS = {
    # the bottom: settings, the contract, errors, and what every part uses (no domain logic)
    **dict.fromkeys(
        (
            *("pochta", "errors", "types", "config", "netaddr", "tls", "budget", "logs"),
            *("metrics", "secretfile", "sqlitedb", "executors", "cpupool"),
            *("postgres", "redisconn", "pickling"),
        ),
        0,
    ),
    "mime": 1,  # the letter: split and reassembled, pure
    **dict.fromkeys(["antispam", "blobs", "guard", "history"], 2),
    "mailbox": 3,  # delivery, the index, deletion: over the blob store, antispam and guard
    "app": 4,  # builds the services from the settings
    "health": 4,  # watches the parts (the pairs, the queue's runner) for /healthz
    **dict.fromkeys(["server", "cli", "__main__"], 5),  # the edges
}
"""SPEC §1's parts, bottom to top: a module may import its own part and the parts below it."""


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of ``graph`` from a part to a part above it."""
    return sorted(
        f"{a} -> {b}"
        for a, imported in graph.items()
        for b in imported
        if LAYERS[_part(b)] > LAYERS[_part(a)]
    )


def test_no_import_runs_up_the_layers() -> None:
    graph = _graph("pochta")
    assert {_part(m) for m in graph} <= set(LAYERS)  # a new part must be placed in a layer
    assert _upward(graph) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {
        "pochta.config": {"pochta.antispam.auth.resolver", "pochta.errors"},
        "pochta.mailbox.intake": {"pochta.mime.letter", "pochta.app"},
    }
    assert _upward(graph) == [
        "pochta.config -> pochta.antispam.auth.resolver",
        "pochta.mailbox.intake -> pochta.app",
    ]


EDGES = ("server", "cli", "__main__")
"""The parts that serve people and programs: the HTTP API and pages, IMAP, SMTP, the CLI."""
DOOR = {
    "pochta.mailbox",
    "pochta.mailbox.service",  # Mailbox, the door
    "pochta.mailbox.intake",  # raw letters handed to the workers
    "pochta.mailbox.prepare",  # what a worker makes of one (Prepared)
    "pochta.mailbox.trace",  # the trace header SMTP writes
    "pochta.mailbox.lists",  # the sender lists: a service with a door of its own
    "pochta.mailbox.importer",  # mbox / Maildir import (pochta mail import)
    # the incoming queue (smtp.answer = "queued"): its record, its store's entry, its runner,
    # which SMTP hands letters to and starts; it delivers through SMTP's own path
    *("pochta.mailbox.queue", "pochta.mailbox.queuedb", "pochta.mailbox.queuerunner"),
    "pochta.mailbox.queueadmin",  # the queue from outside its servers: pochta queue, backup
}
"""The mailbox modules an edge may import; the rest (the rooms, the index, feedback,
deletion...) are behind ``Mailbox``."""
ROOMS = {
    *("index", "blobs", "users", "reading", "delivery", "deletions", "journal", "checks"),
    "forget_hooks",
}
"""``Mailbox``'s rooms and what it owns: an edge calls the door's methods instead."""


def _names_a_mailbox(node: ast.expr, names: set[str]) -> bool:
    """``x.mailbox``, ``mailbox(request)`` or a name bound to one (or annotated ``Mailbox``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "mailbox"
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.Call) and _names_a_mailbox(node.func, {"mailbox"})


def _past_the_door(source: str) -> list[str]:
    """Every ``<a mailbox>.<room>`` in ``source`` (line: attribute)."""
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        annotation = node.annotation if isinstance(node, ast.arg | ast.AnnAssign) else None
        if annotation is not None and ast.unparse(annotation).strip("'\"") in ("Mailbox", "Box"):
            if isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    for node in ast.walk(tree):  # names bound to a mailbox: `box = v.pochta.mailbox`
        if isinstance(node, ast.Assign) and _names_a_mailbox(node.value, names):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return sorted(
        f"{node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ROOMS
        and _names_a_mailbox(node.value, names)
    )


def test_the_edges_go_through_the_mailbox_door() -> None:
    """SPEC §1's edges import of the mailbox only the door and what it hands out (``DOOR``)
    and never reach past ``Mailbox`` into its rooms or its index (``ROOMS``)."""
    modules = _modules("pochta")
    known = set(modules)
    wrong = []
    for name, (path, is_package) in sorted(modules.items()):
        if _part(name) not in EDGES:
            continue
        for module, line in _imports(name, path, is_package, known):
            if _part(module) == "mailbox" and module.startswith("pochta.") and module not in DOOR:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
        wrong += [f"{path.relative_to(SRC)}:{w}" for w in _past_the_door(path.read_text())]
    assert wrong == []


def test_the_door_check_sees_an_edge_reach_past_the_mailbox() -> None:
    source = """
def page(pochta, v, request, m: Mailbox, n: "Mailbox"):
    pochta.mailbox.index.users()
    box = v.pochta.mailbox
    box.users.logins
    mailbox(request).reading
    m.delivery
    n.deletions.wake()
    pochta.mailbox.user(email)
    pochta.deletions.wake()
    pochta.blobs.pairs()
    settings.mailbox.backend
"""
    assert _past_the_door(source) == [
        "3: .index",
        "5: .users",
        "6: .reading",
        "7: .delivery",
        "8: .deletions",
    ]


INDEX_ENGINES = ("pochta.mailbox.sqlite", "pochta.mailbox.postgres", "pochta.mailbox.index")
"""The mail index's engines (``MailIndex``): beside the mailbox package's other modules, or in a
folder of their own (``pochta.mailbox.index``), whichever layout holds."""
READS_AT = "pochta.server.imapstore"
"""The one edge module that reads the index, in pieces, through ``Mailbox.reads``
(``ImapIndex``: reads only) as ``ImapStore.index``."""


def _index_engine(module: str) -> bool:
    return any(module == e or module.startswith(e + ".") for e in INDEX_ENGINES)


def _index_reach(source: str, *, reads: bool) -> list[str]:
    """Every reach into the index in ``source`` (line: what): ``<x>.index.<attr>``, an import
    of an index type (``pochta.types``' ``*Index``) and ``<a mailbox>.reads``; with
    ``reads``, IMAP's store's own reads are allowed (``self.index.<read>``, ``ImapIndex``,
    ``mailbox.reads``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "pochta.types":
            found += [
                f"{node.lineno}: imports {a.name}"
                for a in node.names
                if a.name.endswith("Index") and not (reads and a.name == "ImapIndex")
            ]
        if not isinstance(node, ast.Attribute):
            continue
        held = node.value
        if isinstance(held, ast.Attribute) and held.attr == "index":
            if not (reads and isinstance(held.value, ast.Name) and held.value.id == "self"):
                found.append(f"{node.lineno}: .index.{node.attr}")
        elif node.attr == "reads" and not reads and _names_a_mailbox(held, set()):
            found.append(f"{node.lineno}: .reads")
    return sorted(found)


def test_no_edge_reaches_the_index_but_imaps_reads() -> None:
    """The edges never hold the mail index nor name its types: IMAP's store alone reads it,
    in pieces, through the reads-only ``ImapIndex`` that ``Mailbox.reads`` gives."""
    wrong = []
    for name, (path, _) in sorted(_modules("pochta").items()):
        if _part(name) in EDGES:
            found = _index_reach(path.read_text(), reads=name == READS_AT)
            wrong += [f"{path.relative_to(SRC)}:{w}" for w in found]
    assert wrong == []


def test_the_index_check_sees_an_edge_reach_the_index() -> None:
    source = """
from pochta.types import Folder, ImapIndex, MailIndex
def page(pochta, self, worker, v):
    pochta.mailbox.index.users()
    self.index.skeletons(1, [2])
    v.pochta.mailbox.reads.folders(1)
    self.reads.search(1)
    log.info("%d", worker.index)
"""
    assert _index_reach(source, reads=False) == [
        "2: imports ImapIndex",
        "2: imports MailIndex",
        "4: .index.users",
        "5: .index.skeletons",
        "6: .reads",
    ]
    assert _index_reach(source, reads=True) == ["2: imports MailIndex", "4: .index.users"]


def test_only_the_app_and_the_mailbox_import_the_index_engines() -> None:
    """``app.py`` picks the index's engine and hands the mailbox its ``MailIndex``; nothing else
    of the runtime, the factory or the benchmarks imports an engine (tests may)."""
    wrong = []
    for package in ("pochta", FACTORY):
        modules = _modules(package)
        for name, (path, is_package) in sorted(modules.items()):
            if name == "pochta.app" or _part(name) == "mailbox":
                continue
            wrong += [
                f"{path.relative_to(SRC)}:{line} imports {module}"
                for module, line in _imports(name, path, is_package, set(modules))
                if _index_engine(module)
            ]
    for path in sorted((SRC.parent / "benchmarks").rglob("*.py")):
        wrong += [
            f"{path.relative_to(SRC.parent)}:{line} imports {module}"
            for module, line in _imports(path.stem, path, False, set())
            if _index_engine(module)
        ]
    assert wrong == []
    assert _index_engine("pochta.mailbox.index.postgres") and _index_engine("pochta.mailbox.sqlite")
    assert not _index_engine("pochta.mailbox.lists.sqlite")
