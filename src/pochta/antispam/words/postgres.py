"""Learned words in PostgreSQL (migration 0009): one table for every loader of an installation.

    pochta.learned_words  (owner, hash, spam, ham, day)  owner 0 the installation, else an
                                                         account's id; hash the word's signed
                                                         64-bit hash; day its last day seen
    pochta.learned_totals (owner, spam, ham)             the letters each owner learned

``add`` is one transaction: one upsert of all the letter's words from arrays (``unnest``), then
the owner's totals. Several loaders add at once: each upsert takes its rows' locks in the
order of the hashes (the rows are sorted before they are sent) and the totals' row last, so two
adds never wait for each other in a circle; a deadlock or a serialization failure the server
still reports is retried by ``Postgres.transaction``. Counts saturate at 2^63 - 1 and never go
below 0, as in the SQLite store: a new word takes the delta as given, and a second statement of
the same transaction lifts the few rows a negative delta took below 0 (nobody sees them: the
rows stay locked until the commit). ``counts`` is one query (``hash = ANY(%s)``); ``prune``
deletes an owner's words with the oldest day first (an index on owner, day), one prune per
owner at a time (an advisory lock), its rows locked in the order of the hashes as an add's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pochta.antispam.words import WordStore
from pochta.antispam.words.sqlite import signed, unsigned
from pochta.postgres.database import Postgres

_MAX = "9223372036854775807"
# the rows come sorted by hash: every add locks them in the same order
_ADD = f"""
INSERT INTO pochta.learned_words AS w (owner, hash, spam, ham, day)
SELECT %(owner)s, t.h, t.s, t.m, %(day)s
FROM unnest(%(h)s::bigint[], %(s)s::bigint[], %(m)s::bigint[]) AS t(h, s, m)
ORDER BY t.h
ON CONFLICT (owner, hash) DO UPDATE SET
  spam = CASE WHEN excluded.spam > 0 AND w.spam > {_MAX} - excluded.spam THEN {_MAX}
              ELSE greatest(0, w.spam + excluded.spam) END,
  ham = CASE WHEN excluded.ham > 0 AND w.ham > {_MAX} - excluded.ham THEN {_MAX}
             ELSE greatest(0, w.ham + excluded.ham) END,
  day = excluded.day
"""  # noqa: S608 - constants only
_LIFT = """
UPDATE pochta.learned_words SET spam = greatest(spam, 0), ham = greatest(ham, 0)
WHERE owner = %s AND hash = ANY(%s::bigint[]) AND (spam < 0 OR ham < 0)
"""
_TOTALS = f"""
INSERT INTO pochta.learned_totals AS t (owner, spam, ham)
VALUES (%(owner)s, greatest(0, %(s)s::bigint), greatest(0, %(m)s::bigint))
ON CONFLICT (owner) DO UPDATE SET
  spam = CASE WHEN %(s)s::bigint > 0 AND t.spam > {_MAX} - %(s)s::bigint THEN {_MAX}
              ELSE greatest(0, t.spam + %(s)s::bigint) END,
  ham = CASE WHEN %(m)s::bigint > 0 AND t.ham > {_MAX} - %(m)s::bigint THEN {_MAX}
             ELSE greatest(0, t.ham + %(m)s::bigint) END
"""  # noqa: S608 - constants only
_PRUNE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('pochta.learned_words:' || %s, 0))"


class PostgresWordStore:
    def __init__(self, db: Postgres) -> None:
        """``db`` is this store's: it closes it (``db.share()`` to keep using it)."""
        self._db = db

    def add(
        self,
        owner: int,
        words: Mapping[int, tuple[int, int]],
        letters: tuple[int, int],
        day: int,
    ) -> None:
        rows = sorted((signed(h), s, m) for h, (s, m) in words.items())
        below = [h for h, s, m in rows if s < 0 or m < 0]
        params = {
            "owner": owner,
            "day": day,
            "h": [r[0] for r in rows],
            "s": [r[1] for r in rows],
            "m": [r[2] for r in rows],
        }

        def step(conn: Any) -> None:
            if rows:
                conn.execute(_ADD, params)
            if below:
                conn.execute(_LIFT, (owner, below))
            conn.execute(_TOTALS, {"owner": owner, "s": letters[0], "m": letters[1]})

        self._db.transaction(step)

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        if not words:
            return {}
        rows = self._db.query(
            "SELECT hash, spam, ham FROM pochta.learned_words"
            " WHERE owner = %s AND hash = ANY(%s::bigint[])",
            (owner, [signed(h) for h in words]),
        )
        return {unsigned(int(h)): (int(s), int(m)) for h, s, m in rows}

    def totals(self, owner: int) -> tuple[int, int]:
        rows = self._db.query(
            "SELECT spam, ham FROM pochta.learned_totals WHERE owner = %s", (owner,)
        )
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def size(self, owner: int) -> int:
        rows = self._db.query(
            "SELECT count(*) FROM pochta.learned_words WHERE owner = %s", (owner,)
        )
        return int(rows[0][0])

    def prune(self, owner: int, keep: int) -> int:
        def step(conn: Any) -> int:
            conn.execute(_PRUNE_LOCK, (str(owner),))
            (n,) = conn.execute(
                "SELECT count(*) FROM pochta.learned_words WHERE owner = %s", (owner,)
            ).fetchone()
            excess = int(n) - max(keep, 0)
            if excess <= 0:
                return 0
            # the oldest day first; on a tie the lower hash as an unsigned number (as the
            # memory store): the non-negative signed ones, then the negative ones
            victims = [
                r[0]
                for r in conn.execute(
                    "SELECT hash FROM pochta.learned_words WHERE owner = %s"
                    " ORDER BY day, hash < 0, hash LIMIT %s",
                    (owner, excess),
                ).fetchall()
            ]
            conn.execute(
                "SELECT 1 FROM pochta.learned_words WHERE owner = %s AND hash = ANY(%s::bigint[])"
                " ORDER BY hash FOR UPDATE",
                (owner, victims),
            )
            return int(
                conn.execute(
                    "DELETE FROM pochta.learned_words"
                    " WHERE owner = %s AND hash = ANY(%s::bigint[])",
                    (owner, victims),
                ).rowcount
            )

        return self._db.transaction(step)

    def forget(self, owner: int) -> None:
        def step(conn: Any) -> None:
            conn.execute("DELETE FROM pochta.learned_words WHERE owner = %s", (owner,))
            conn.execute("DELETE FROM pochta.learned_totals WHERE owner = %s", (owner,))

        self._db.transaction(step)

    def owners(self) -> list[int]:
        rows = self._db.query("SELECT owner FROM pochta.learned_totals ORDER BY owner")
        return [int(r[0]) for r in rows]

    def all_totals(self) -> dict[int, tuple[int, int]]:
        rows = self._db.query("SELECT owner, spam, ham FROM pochta.learned_totals")
        return {int(o): (int(s), int(h)) for o, s, h in rows}

    def close(self) -> None:
        self._db.close()


def _check(store: PostgresWordStore) -> WordStore:  # the Protocol, checked by mypy
    return store
