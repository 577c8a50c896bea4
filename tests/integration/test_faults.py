"""Faults with real processes: ``pochta serve`` killed with SIGKILL at random moments while
letters with shared attachments are delivered, deleted and delivered again; then Valkyrie,
bit flips, a lost disk and its evacuation. Two judges: the mailboxes (every letter answered
250 is delivered exactly once, deletions aside) and ``pochta fsck`` (nothing lost, nothing
damaged, no counter below its references).

The harness lives in ``tests/faults.py``; ``benchmarks/fault_campaign.py`` runs the same
campaign with 1,000 kills."""

from __future__ import annotations

import random
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pochta.mailbox.queuedb import QueueStore
from tests.faults import (
    USERS,
    HarnessError,
    Workload,
    campaign,
    judge_mailboxes,
    settle,
    steady_ports,
    tagged,
)
from tests.integration.test_smtp import add_users
from tests.unit.test_queue import entry

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# every restart is a ``pochta serve`` start (seconds): 30 kills, seeded so that both kinds
# come (10 during startup and recovery, 20 while it works); the benchmark runs 1,000
KILLS = 30


def assert_sound(report: dict[str, Any]) -> None:
    """Nothing lost, damaged, unreadable, or undercounted with agreeing magic (a file that
    decs could delete while letters still reference it); and every counter exact: the
    journal makes each count happen once, so neither "miscounted" (short, magic disagrees)
    nor "leaks" (counted more than referenced)."""
    for name in ("lost", "damaged", "unreadable", "undercounted", "miscounted", "leaks"):
        assert report[name] == [], f"{name}: {report[name][:5]}"


def test_sigkill_campaign_then_valkyrie_bit_flips_and_a_lost_disk(tmp_path: Path) -> None:
    result = campaign(tmp_path, kills=KILLS, seed=2026)
    assert result.kills == KILLS
    # killed in both phases the campaign names: while starting/recovering, and while working
    assert 0 < result.kills_starting < result.kills, result.kills_starting
    assert result.delivered > 20, (result.delivered, result.failed)

    # the last run: recovery, pending deletions and the queue finish; every letter answered
    # 250 (queued: answered once durable in the incoming queue) is in its mailboxes once
    assert result.last_exit == 0
    assert result.answered > 20, result.answered
    assert result.mailbox_missing == [], result.mailbox_missing[:5]
    assert result.mailbox_twice == [], result.mailbox_twice[:5]

    report = result.fsck_after_kills
    assert_sound(report)
    assert report["letters"] > 0 and report["blobs"] > 0

    # Valkyrie, acting at once (nothing runs meanwhile): two passes, so both disks act
    assert len(result.valkyrie_passes) == 2
    for swept in result.valkyrie_passes:
        assert swept["errors"] == 0, swept
    assert_sound(result.fsck_after_valkyrie)

    # bit flips: every one is repaired from the sibling copy
    assert result.flipped > 0
    assert result.repaired == result.flipped
    assert_sound(result.fsck_after_bit_flips)

    # a disk directory disappears: detected, the pair evacuated, two good copies afterwards
    swept = result.valkyrie_lost_disk
    assert swept["errors"] >= 1
    assert result.lost_disk_detected, swept["disks"]
    assert result.evacuate_exit == 0, result.evacuation
    moved = result.evacuation
    assert (moved["left"], moved["errors"]) == (0, 0)
    assert result.retire_exit == 0
    report = result.fsck_final
    assert_sound(report)  # fsck reads both copies of every referenced file
    assert report["blobs"] > 0
    assert result.sound and result.exact and result.failed_checks() == []


def test_the_mailbox_judge_finds_a_letter_missing_twice_or_back_after_its_deletion() -> None:
    """The campaign's judge of the mailboxes (no server): a letter answered 250 that a
    recipient lacks, one a recipient has twice, one deleted with an answer yet still there;
    a letter deleted (answer or not) may be gone, one never answered may be there once."""
    work = Workload(0, 0, {}, seed=1)
    a, b = USERS
    work.answered = {"t1": (a, b), "t2": (a,), "t3": (b,), "t4": (a,), "t5": (b,)}
    work.maybe_deleted = {(a, "t3"), (b, "t3"), (a, "t4"), (b, "t5")}
    work.deleted_letters = {(b, "t3"), (b, "t5")}
    counts = Counter({(a, "t1"): 1, (b, "t1"): 1, (a, "t2"): 1, (a, "t9"): 1})
    assert judge_mailboxes(work, counts) == {"missing": [], "twice": []}
    counts[(a, "t2")] = 0  # answered, not deleted, not there
    counts[(a, "t9")] = 2  # never answered, there twice
    counts[(b, "t5")] = 1  # deleted with an answer, still there: a second copy
    assert judge_mailboxes(work, counts) == {
        "missing": [f"{a}: t2"],
        "twice": [f"{a}: t9 x2", f"{b}: t5 deleted, still there"],
    }
    assert tagged(b"To: x\r\nSubject: letter 1\r\n\r\nbody", "t7") == (
        b"To: x\r\nSubject: t7\r\n\r\nbody"
    )


def test_the_mailbox_judge_waits_for_the_incoming_queue_to_drain(tmp_path: Path) -> None:
    """Nothing is missing from the mailboxes, but a letter still waits in the incoming queue:
    its delivery may yet put a second copy of a letter there (a delivery a kill cut short
    after its commit, tried again). The judge does not speak before the queue is empty: with
    no server to deliver it, settling fails rather than report no letter twice."""
    data = tmp_path / "data"
    add_users(data, *USERS)
    store = QueueStore(data / "queue", inline=100)
    store.put(entry(16), b"x" * 16)  # answered 250, never delivered (no server runs)
    store.close()
    work = Workload(0, 0, {}, seed=1)  # the workload's letters are all there (none)
    with pytest.raises(HarnessError, match="incoming queue"):
        settle(data, work, timeout=1)


def test_the_campaign_ports_are_free_and_below_the_ephemeral_range() -> None:
    """The ports kept across restarts: no outgoing connection can be handed one."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = steady_ports(2, random.Random(7))
    assert len(set(ports)) == 2
    for port in ports:
        assert 1024 <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free
