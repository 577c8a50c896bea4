"""The memory-mapped connection table across real processes: a process that dies (SIGKILL,
no cleanup) stops counting, the one that takes its slot starts from nothing, and the slots
run out with a clear error."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pochta.errors import ConfigError
from pochta.guard.anvil.mapped import MappedConnectionTable
from pochta.types import ConnectionTally

W = 1000

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pochta.guard.anvil.mapped import MappedConnectionTable
    t = MappedConnectionTable(Path(sys.argv[1]))
    t.add(7, 1000, connections=30, attempts=40)
    print(t.slot, flush=True)
    time.sleep(60)
    """
)


def test_a_killed_process_stops_counting_and_its_slot_is_cleared(tmp_path: Path) -> None:
    where = tmp_path / "connections"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(where)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        slot = int(child.stdout.readline())
        reader = MappedConnectionTable(where, refresh=0.0)
        assert reader.slot != slot
        reader.add(7, W, connections=1)
        assert reader.read(7, W) == ConnectionTally(31, 40, 0)
        child.send_signal(signal.SIGKILL)  # no chance to clean anything up
        child.wait(10)
        assert reader.read(7, W) == ConnectionTally(1, 0, 0)
        heir = MappedConnectionTable(where, refresh=0.0)  # the restarted worker
        assert heir.slot == slot
        assert heir.read(7, W) == ConnectionTally(1, 0, 0)  # the dead one's counts are gone
        heir.add(7, W, connections=2)
        assert reader.read(7, W) == ConnectionTally(3, 0, 0)
        heir.close()
        reader.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_a_reader_looks_at_the_slots_again_only_after_refresh(tmp_path: Path) -> None:
    now = [0.0]
    reader = MappedConnectionTable(tmp_path, refresh=1.0, clock=lambda: now[0])
    assert reader.read(7, W) == ConnectionTally()
    other = MappedConnectionTable(tmp_path)
    other.add(7, W, connections=1)
    assert reader.read(7, W) == ConnectionTally()  # not looked at yet
    now[0] = 1.0
    assert reader.read(7, W) == ConnectionTally(1, 0, 0)
    other.close()
    reader.close()


def test_when_every_slot_is_held_the_error_says_so(tmp_path: Path) -> None:
    held = [MappedConnectionTable(tmp_path, slots=2) for _ in range(2)]
    with pytest.raises(ConfigError, match=r"all 2 connection-count slots in .* are held"):
        MappedConnectionTable(tmp_path, slots=2)
    for t in held:
        t.close()
    MappedConnectionTable(tmp_path, slots=2).close()  # closed: free again


def test_a_slot_of_another_layout_is_not_read(tmp_path: Path) -> None:
    small = MappedConnectionTable(tmp_path, capacity=64)
    small.add(7, W, connections=5)
    big = MappedConnectionTable(tmp_path, capacity=128, refresh=0.0)
    assert big.read(7, W) == ConnectionTally()
    small.close()
    big.close()


def test_the_heir_of_a_dead_slot_counts_at_once_not_at_the_next_look(tmp_path: Path) -> None:
    """A reader that has seen a slot dead still counts the process that claims it again before
    its own next look: a replaced worker's connections never go uncounted for `refresh`."""
    now = [0.0]
    reader = MappedConnectionTable(tmp_path, refresh=1.0, clock=lambda: now[0])
    dying = MappedConnectionTable(tmp_path)
    now[0] = 1.0
    dying.add(7, W, connections=4)
    assert reader.read(7, W) == ConnectionTally(4, 0, 0)
    dying.close()
    now[0] = 2.0
    assert reader.read(7, W) == ConnectionTally()  # seen dead at this look
    heir = MappedConnectionTable(tmp_path)
    assert heir.slot == dying.slot
    heir.add(7, W, connections=2)
    assert reader.read(7, W) == ConnectionTally(2, 0, 0)  # no look since: counted all the same
    heir.close()
    now[0] = 3.0
    assert reader.read(7, W) == ConnectionTally()
    reader.close()
