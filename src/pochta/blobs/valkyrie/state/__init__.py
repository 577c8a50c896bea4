"""Where Valkyrie keeps each disk's position and running totals: the ``StateStore`` contract
(Valkyrie's own port, beside its records in ``report``) and ``summarize``, which both stores
share; the stores: ``sqlite.ValkyrieState`` (embedded, the default) and
``postgres.PostgresValkyrieState``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pochta.blobs.valkyrie.report import COUNT_NAMES, Counts


class StateStore(Protocol):
    """Where Valkyrie keeps each disk's position and running totals: ``ValkyrieState``
    (SQLite, embedded) or ``pochta.blobs.valkyrie.state.postgres.PostgresValkyrieState``."""

    def position(self, disk: str) -> str:
        """The name the last pass stopped after ("" for a pass from the start)."""

    def save(self, disk: str, position: str, delta: Counts, *, finished_at: float | None) -> None:
        """Store the position ("" after a finished pass) and add ``delta`` to the totals;
        ``finished_at``: the pass ended then (passes + 1, last_pass)."""

    def summary(self) -> dict[str, Any]:
        """Totals over every disk, and each disk's own (for ``pochta stats``)."""

    def close(self) -> None: ...


def summarize(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Rows of (disk, position, passes, last_pass, *COUNT_NAMES) as ``StateStore.summary``."""
    disks = []
    totals = dict.fromkeys(COUNT_NAMES, 0)
    for row in rows:
        counts = dict(zip(COUNT_NAMES, row[4:], strict=True))
        for n, v in counts.items():
            totals[n] += v
        disks.append(
            {"disk": row[0], "position": row[1], "passes": row[2], "last_pass": row[3]} | counts
        )
    return {**totals, "disks": disks}
