"""Connection counts shared by the processes of one server (``pochta.types.ConnectionTable``).

``pochta serve --processes N`` runs N processes behind the same ports; the kernel spreads one
client's connections over them (SO_REUSEPORT hashes the 4-tuple), so counts kept per process
would let a client have N times its limit. ``MappedConnectionTable`` shares them through
files in ``<data_dir>/connections/``:

- each process claims one **slot**: the file ``slot-<i>``, on which it holds an exclusive
  ``flock`` for as long as it runs, mapped into memory (``mmap``). It writes only there;
- a read sums the key's entry in the process's own slot and in every other **live** slot,
  mapped read-only. A slot is live while its lock is held; the kernel drops the lock when its
  process exits, however it dies (SIGKILL, OOM), so a dead worker's connections stop counting
  within ``refresh`` seconds (every read looks at the slots again once that long has passed),
  and the process that next claims the slot clears it first. Nothing has to clean up after
  a death, and the supervisor takes no part. A dead slot stays mapped, its counts ignored
  while its header still names the dead process's claim: the heir that claims it (a replaced worker
  takes the lowest free slot, its predecessor's) counts in every reader at once, not at the
  reader's next look, so a restart does not open a second of twice the limit;
- a slot is a fixed-size hash table (open addressing, linear probing from the key's hash, at
  most ``MAX_PROBE`` steps). An entry whose connections are all closed and whose attempts have
  aged out of the rate windows counts nothing and is reused for another key. A key that finds
  no room within its probes is not counted (``add`` returns False; the gate lets the
  connection in on the limits it could check and /metrics counts it). The few protocol totals
  live in a small area of their own and always find room, so an attacker who fills the table
  with addresses still meets the total limits.

Why this and not the alternatives the issue names: asking the supervisor (Postfix's anvil is
a server) costs a round trip between processes on every connection and its close, and puts
every acceptance behind one process that must never stall; per-process limits of limit / N
refuse a client early whenever the kernel's hash gives one worker more than its share (with 13
per worker of 4, a client is refused before its 50th connection 97% of the time: one worker
gets 14 or more). Here a check is a
few reads of local memory: 16 us of CPU per connection admitted and closed with 2 workers, 21
with 4, 13 on the in-memory table (``benchmarks/connection_gate.py``; BENCHMARKS.md). The
price: reads and writes are not one atomic step across processes, so two workers accepting at
the same instant can each miss the other's newest connection (a limit exceeded by at most
N - 1 for a moment), and a reader may see an entry half-written (a count off by one for a
moment). For limits against abuse that is the right trade; a byte-exact count would need a
lock on every connection.

``memory.MemoryConnectionTable`` keeps the same counts in dicts, for one process (tests, an
``ImapServer`` built without a gate).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

from pochta.errors import ConfigError
from pochta.guard.anvil import seen_from
from pochta.types import Clock, ConnectionTally

MAGIC = b"PCHCONN1"
HEADER = struct.Struct("<8sIIII")  # magic, capacity, totals area, pid, claim (random, not 0)
HEADER_SIZE = 64
ENTRY = struct.Struct("<QqiII")  # key, window, connections, attempts now, attempts before
KEY = struct.Struct("<Q")
CAPACITY = 1 << 15  # entries per slot for addresses and networks: 24 B each, 768 KB
TOTALS = 16  # entries for the protocols' totals (4 protocols use 4)
MAX_PROBE = 32
SLOTS = 64  # processes at most (`serve --processes` takes up to 64)
REFRESH = 1.0  # seconds between two looks at which slots are live


def _size(capacity: int) -> int:
    return HEADER_SIZE + (TOTALS + capacity) * ENTRY.size


class _Area:
    """Where a key's entry may be: the totals area or the addresses' one."""

    __slots__ = ("base", "n", "probes")

    def __init__(self, base: int, n: int) -> None:
        self.base = base
        self.n = n
        self.probes = min(MAX_PROBE, n)

    def offsets(self, key: int) -> Iterator[int]:
        """The entries to look at for ``key``, in order."""
        n, base, size = self.n, self.base, ENTRY.size
        index = key % n
        for _ in range(self.probes):
            yield base + index * size
            index += 1
            if index == n:
                index = 0


def _find(buf: mmap.mmap, area: _Area, key: int) -> int | None:
    unpack = KEY.unpack_from
    for offset in area.offsets(key):
        found = unpack(buf, offset)[0]
        if found == key:
            return offset
        if found == 0:
            return None
    return None


class MappedConnectionTable:
    """``ConnectionTable`` in ``directory`` (see the module's docstring). ConfigError when no
    slot is free or the directory cannot be used."""

    def __init__(
        self,
        directory: Path,
        *,
        capacity: int = CAPACITY,
        slots: int = SLOTS,
        refresh: float = REFRESH,
        clock: Clock = time.monotonic,
    ) -> None:
        self.directory = directory
        self.capacity = capacity
        self.size = _size(capacity)
        # indexed by `total`: the addresses' and networks' area, then the totals' one
        self._areas = (
            _Area(HEADER_SIZE + TOTALS * ENTRY.size, capacity),
            _Area(HEADER_SIZE, TOTALS),
        )
        self._refresh = refresh
        self._clock = clock
        self._looked = -float("inf")
        # slot -> (fd, read-only map, the claim its header named when it was found dead, or 0)
        self._others: dict[int, tuple[int, mmap.mmap, int]] = {}
        self._own: dict[int, int] = {}  # key -> offset in our slot
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.slot, self._fd, self._buf = self._claim(slots)
        except OSError as exc:
            raise ConfigError(f"cannot use {directory} for connection counts: {exc}") from None

    def _claim(self, slots: int) -> tuple[int, int, mmap.mmap]:
        for slot in range(slots):
            fd = os.open(self.directory / f"slot-{slot}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                had = os.fstat(fd).st_size
                if had < self.size:
                    os.ftruncate(fd, self.size)  # never shrunk: a reader's map must stay valid
                buf = mmap.mmap(fd, self.size)
            except OSError:
                os.close(fd)
                raise
            if had:  # a dead process's counts: cleared before anything is counted
                buf[: self.size] = bytes(self.size)
            claim = int.from_bytes(os.urandom(4), "little") or 1  # tells one claim from the next
            HEADER.pack_into(buf, 0, MAGIC, self.capacity, TOTALS, os.getpid(), claim)
            return slot, fd, buf
        raise ConfigError(
            f"all {slots} connection-count slots in {self.directory} are held by running"
            " processes (more pochta servers on this data directory than that?)"
        )

    # -- reading ----------------------------------------------------------------------------
    def _look(self) -> None:
        """Map the slots that are live and drop the ones whose process is gone."""
        now = self._clock()
        if now - self._looked < self._refresh:
            return
        self._looked = now
        seen = set()
        for path in self.directory.glob("slot-*"):
            suffix = path.name.removeprefix("slot-")
            if not suffix.isdigit() or int(suffix) == self.slot:
                continue
            slot = int(suffix)
            seen.add(slot)
            mapped = self._others.get(slot)
            if mapped is None:
                self._map(slot, path)
                continue
            fd, buf, _ = mapped
            if not self._live(fd):  # left mapped: its heir is counted as soon as it claims it
                self._others[slot] = (fd, buf, HEADER.unpack_from(buf, 0)[4] or -1)
            elif self._ours(buf):
                self._others[slot] = (fd, buf, 0)
            else:  # claimed again by a process of another layout
                self._forget(slot)
        for slot in set(self._others) - seen:
            self._forget(slot)

    @staticmethod
    def _live(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True  # its process holds it
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def _map(self, slot: int, path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            if self._live(fd) and os.fstat(fd).st_size >= self.size:
                buf = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
                if self._ours(buf):
                    self._others[slot] = (fd, buf, 0)
                    return
                buf.close()  # being set up, or another layout: looked at again later
        except OSError:
            pass
        os.close(fd)

    def _ours(self, buf: mmap.mmap) -> bool:
        """Whether the slot in ``buf`` has our layout."""
        magic, capacity, totals, _, _ = HEADER.unpack_from(buf, 0)
        return (magic, capacity, totals) == (MAGIC, self.capacity, TOTALS)

    def _forget(self, slot: int) -> None:
        mapped = self._others.pop(slot, None)
        if mapped is not None:
            mapped[1].close()
            os.close(mapped[0])

    def read(self, key: int, window: int, *, total: bool = False) -> ConnectionTally:
        self._look()
        connections = current = previous = 0
        own = self._own.get(key)
        buffers: list[tuple[mmap.mmap, int | None]] = [(self._buf, own)]
        area = self._areas[total]
        buffers += [
            (buf, _find(buf, area, key))
            for _, buf, dead in self._others.values()
            # a dead slot counts again once another process has claimed it
            if not dead or (HEADER.unpack_from(buf, 0)[4] != dead and self._ours(buf))
        ]
        for buf, offset in buffers:
            if offset is None:
                continue
            _, written, open_, now, before = ENTRY.unpack_from(buf, offset)
            now, before = seen_from(written, now, before, window)
            connections += open_
            current += now
            previous += before
        return ConnectionTally(max(0, connections), current, previous)

    # -- writing (our slot only) --------------------------------------------------------------
    def _place(self, key: int, window: int, total: bool) -> int | None:
        """An entry for ``key`` in our slot: an empty one, or one that counts nothing."""
        for offset in self._areas[total].offsets(key):
            found, written, open_, _, _ = ENTRY.unpack_from(self._buf, offset)
            if found == 0 or (open_ <= 0 and written < window - 1):
                if found:
                    self._own.pop(found, None)
                ENTRY.pack_into(self._buf, offset, key, window, 0, 0, 0)
                self._own[key] = offset
                return offset
        return None

    def add(
        self,
        key: int,
        window: int,
        *,
        connections: int = 0,
        attempts: int = 0,
        total: bool = False,
    ) -> bool:
        offset = self._own.get(key)
        if offset is None:
            offset = self._place(key, window, total)
            if offset is None:
                return False
        _, written, open_, now, before = ENTRY.unpack_from(self._buf, offset)
        window = max(window, written)
        now, before = seen_from(written, now, before, window)
        ENTRY.pack_into(self._buf, offset, key, window, open_ + connections, now + attempts, before)
        return True

    def close(self) -> None:
        for slot in list(self._others):
            self._forget(slot)
        if not self._buf.closed:
            self._buf.close()
            with contextlib.suppress(OSError):
                os.close(self._fd)  # the lock goes with it: the slot is free
