"""The spool's disk reserve (pochta.guard.reserve): Postfix's rule, and free space read at most
once a second however many MAIL commands come, with an injected reader and clock."""

from __future__ import annotations

from pathlib import Path

from pochta.guard.reserve import DiskReserve, free_bytes, reserve_for


def test_the_reserve_is_postfix_rule_or_the_setting_when_larger() -> None:
    assert reserve_for(50 << 20) == 75 << 20  # 1.5 x message_size_limit
    assert reserve_for(50 << 20, min_free=1 << 30) == 1 << 30  # queue_minfree, larger
    assert reserve_for(50 << 20, min_free=1 << 20) == 75 << 20  # smaller: the rule stands


class Disk:
    def __init__(self, free: int) -> None:
        self.free = free
        self.reads = 0
        self.broken = False

    def __call__(self) -> int:
        self.reads += 1
        if self.broken:
            raise OSError("statvfs failed")
        return self.free


def test_free_space_is_read_at_most_once_per_interval() -> None:
    now = [100.0]
    disk = Disk(free=1000)
    reserve = DiskReserve(500, disk, clock=lambda: now[0], every=1.0)
    assert not any(reserve.low() for _ in range(10_000))  # a flood of MAIL commands
    assert disk.reads == 1
    disk.free = 499
    now[0] += 0.5
    assert not reserve.low()  # the reading is half a second old
    now[0] += 0.5
    assert reserve.low()
    assert disk.reads == 2
    disk.free = 500  # exactly the reserve is enough
    now[0] += 1.0
    assert not reserve.low()


def test_an_unreadable_disk_keeps_the_last_reading_and_none_is_not_low() -> None:
    now = [0.0]
    disk = Disk(free=10)
    disk.broken = True
    reserve = DiskReserve(500, disk, clock=lambda: now[0])
    assert not reserve.low()  # nothing known: mail is not refused for it
    disk.broken = False
    now[0] += 1
    assert reserve.low()
    disk.broken = True
    now[0] += 1
    assert reserve.low()  # the last reading stands


def test_free_bytes_of_a_spool_not_made_yet_is_its_parent_file_system(tmp_path: Path) -> None:
    assert free_bytes(tmp_path / "spool" / "not" / "yet") == free_bytes(tmp_path) > 0
