"""Valkyrie: one scrubber per disk (SPEC §2, seed 004).

The decision for one file is a pure function, ``decide``, of what is known about it (its name
and age, the FileDB records of its key, which disk of which pair it is on) and of the time;
``Valkyrie`` is the I/O loop around it: it walks a disk in name order, asks ``decide``, acts,
counts, and saves its position every few files so that the next run resumes where it stopped.

    <key>.deleted.<ts>       quarantine: purged once ts + quarantine period has passed; renamed
                             back first if its key is live on this pair and the file is missing
    tmp/*.part               a temporary upload: deleted once older than ``tmp_max_age``
    <key>, live here         re-hashed; a corrupt copy is replaced from the sibling disk, a
                             missing sibling copy is recreated; a stale space1 record is dropped
    <key>, live elsewhere    a stray copy: quarantined once the owner's two copies are checked
    <key>, space1 here       quarantined: by the master disk (first bit of the key) at once, by
                             the other after ``slave_delay``, which then drops the space1 record
    <key>, no record         an orphan: quarantined (once older than ``orphan_min_age``)

Nothing is deleted without the quarantine step; every quarantine is checked again right after
the rename and undone when the key has come back to life on this pair meanwhile.

The package, one concept a module (this module re-exports what the rest of pochta uses):

    names      what a file is, from its name (``parse_name``, ``quarantine_name``)
    policy     the settings (``ValkyrieConfig``) and the pure ``decide``
    throttle   the I/O budget (``Throttle``)
    report     what a pass did (``Counts``, ``PassReport``)
    state/     the position and totals: the ``StateStore`` port and its stores,
               ``state/sqlite.py`` (``ValkyrieState``), ``state/postgres.py``
    scrub      the loop (``Valkyrie``)
    runner     the loop in ``pochta serve`` (``ValkyrieRunner``)
"""

from __future__ import annotations

from pochta.blobs.valkyrie.names import QUARANTINE_MARK, Kind, Name, parse_name, quarantine_name
from pochta.blobs.valkyrie.policy import Action, FileAction, Seen, ValkyrieConfig, decide
from pochta.blobs.valkyrie.report import COUNT_NAMES, Counts, PassReport
from pochta.blobs.valkyrie.runner import ValkyrieRunner
from pochta.blobs.valkyrie.scrub import Valkyrie, lock_name
from pochta.blobs.valkyrie.state import StateStore, summarize
from pochta.blobs.valkyrie.state.sqlite import STATE_FILE, ValkyrieState
from pochta.blobs.valkyrie.throttle import Throttle

__all__ = [
    "COUNT_NAMES",
    "QUARANTINE_MARK",
    "STATE_FILE",
    "Action",
    "Counts",
    "FileAction",
    "Kind",
    "Name",
    "PassReport",
    "Seen",
    "StateStore",
    "Throttle",
    "Valkyrie",
    "ValkyrieConfig",
    "ValkyrieRunner",
    "ValkyrieState",
    "decide",
    "lock_name",
    "parse_name",
    "quarantine_name",
    "summarize",
]
