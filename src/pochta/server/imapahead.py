"""Reading ahead for a client that fetches letter after letter (``UID FETCH n`` one at a time:
mbsync, offlineimap, a client catching up), as a kernel reads ahead of a file read in order.

A FETCH of a few letters that goes on from where the session's last one ended is sequential:
the letters after it (a window that doubles with each sequential miss, from
:data:`AHEAD_MIN` to :data:`AHEAD_MAX` letters) are read in the same index read and kept
for the next commands, each whole: a letter with extracted parts of at most
``imapfetching.AHEAD_ENTIRE`` bytes has them read back in, in the store thread, with the
read (so that it is answered without reading a blob); a bigger one is not kept. A
command whose letters are all kept is answered on the event loop, without the trip to the
store's threads that every read takes (SPEC §6: a slow database never stalls the loop;
nothing here reads one). A FETCH that does not go on from the last one reads nothing
ahead: a client that jumps around reads what it asks for.

The kept letters are the session's own: read for its user, with the owner and the state
checked in the read, for the folder selected then (another selection finds none), each
answered only for the UID it had when read. They are
kept at most :data:`AHEAD_BYTES` bytes of skeletons, taken from the server's budget of
bytes in flight (none kept when it is spent), and at most :data:`AHEAD_SECONDS` seconds
(a timer gives them back; an IMAP command but FETCH drops them too). Within that time a
letter another session expunged may still be answered, as it would be by a FETCH that
began a moment earlier; a letter's bytes never change, and its flags come from the
session's own list, not from what was kept.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from pochta.budget import Budget
from pochta.server.imapstore import Opened
from pochta.types import FolderEntry

AHEAD_MIN = 4  # letters read ahead at the first sequential miss
AHEAD_MAX = 64  # at most (the size of a FETCH's batch)
AHEAD_SMALL = 4  # a FETCH of at most this many letters may read ahead, or be answered from it
AHEAD_BYTES = 1 << 20  # skeleton bytes kept per session at most
AHEAD_SECONDS = 1.0  # kept this long at most


class ReadAhead:
    """One session's letters read ahead (see the module's docstring). ``later``: schedules a
    call after a delay, returning its handle (the event loop's ``call_later``)."""

    def __init__(
        self,
        budget: Budget,
        later: Callable[[float, Callable[[], None]], asyncio.TimerHandle],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share = budget.share()
        self.later = later
        self.clock = clock
        self.window = 0
        self._last: tuple[object, int] | None = None  # (folder selected, last position fetched)
        self._kept: dict[int, Opened] = {}
        self._of: object | None = None  # the folder selected when they were read
        self._until = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def get(self, selected: object, entries: Sequence[FolderEntry]) -> list[Opened] | None:
        """The kept letters of these entries, in order; None unless every one is kept (for
        this selection, not too long ago, and with the entry's UID: a letter id given anew
        to another letter comes with a new UID)."""
        if self._of is not selected or not self._kept:
            return None
        if self.clock() > self._until:
            self.drop()
            return None
        kept = self._kept
        out = []
        for entry in entries:
            opened = kept.get(entry.letter_id)
            if opened is None or opened.letter.uid != entry.uid:
                return None
            out.append(opened)
        return out

    def plan(self, selected: object, positions: Sequence[int], total: int) -> range:
        """The positions (0-based, of a folder of ``total`` letters) to read along with a
        FETCH of ``positions`` (ascending): the window after them when the FETCH goes on from
        the last one, else none."""
        if not positions or len(positions) > AHEAD_SMALL:
            return range(0)
        if self._last == (selected, positions[0] - 1):
            self.window = min(AHEAD_MAX, max(AHEAD_MIN, self.window * 2))
        else:
            self.window = 0
        start = positions[-1] + 1
        return range(start, min(total, start + self.window))

    def fetched(self, selected: object, positions: Sequence[int]) -> None:
        """A FETCH of ``positions`` was answered: the next one that goes on from here is
        sequential."""
        self._last = (selected, positions[-1]) if positions else None

    def keep(self, selected: object, opened: dict[int, Opened]) -> None:
        """Keep the letters read ahead (in place of those kept before): those whole (in their
        skeletons, or read back in), while they fit in :data:`AHEAD_BYTES` and the budget."""
        self.drop()
        kept, size = {}, 0
        for letter_id, letter in opened.items():
            if not letter.whole:
                continue
            size += len(letter.skeleton)
            if size > AHEAD_BYTES:
                break
            kept[letter_id] = letter
        if not kept or not self.share.take(sum(len(o.skeleton) for o in kept.values())):
            return
        self._kept, self._of = kept, selected
        self._until = self.clock() + AHEAD_SECONDS
        self._timer = self.later(AHEAD_SECONDS, self.drop)

    def drop(self) -> None:
        """Forget the kept letters and give their bytes back."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._kept, self._of = {}, None
        self.share.release()

    def forget(self) -> None:
        """Drop, and the next FETCH is not sequential (another folder, the session's end)."""
        self.drop()
        self._last = None
        self.window = 0
