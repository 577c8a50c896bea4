"""The several-machines recipe with PostgreSQL that fails over (tests/machines.py with
``failover``: Patroni, a synchronous standby, three etcd members): SMTP clients deliver
through both loaders while the primary's host is lost (its Patroni, PostgreSQL and etcd
member SIGKILLed); Patroni promotes the standby, the loaders' multi-host DSN
(``target_session_attrs=read-write``) finds it, and the lost host comes back as the new
standby. Then: every letter answered 250 is in its mailbox byte for byte, none is there twice
unless its 250 was lost, nothing was refused with a 5xx, no 4xx came before the fault,
``pochta fsck`` is clean.

Used by ``scripts/several-machines --failover`` (a JSON summary with the failover time and the
longest wait for a 250); the CI test (tests/integration/test_several_machines.py) loses the
primary within the recipe's own run (``several.Faults.lose_primary_at``).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from tests.machines import NODE1, Machines
from tests.several import (
    Delivery,
    Sender,
    add_users,
    byte_exact,
    check_letters,
    corpus,
    fsck,
    fsck_problems,
    users,
)


def longest_gap(times: list[float], since: float, until: float) -> float:
    """The longest time between ``since`` and ``until`` with no 250 (``times``: when each
    250 came): how long mail was refused, or waited, at worst."""
    marks = [since, *sorted(t for t in times if since < t < until), until]
    return max(b - a for a, b in itertools.pairwise(marks))


def run(
    machines: Machines, n: int, mailboxes: int = 8, threads: int = 4, kill_at: float = 0.3
) -> dict[str, Any]:
    """Deliver ``n`` letters, losing the primary's host once ``kill_at`` of them got their
    250; a JSON-ready summary whose ``problems`` must be empty."""
    cluster = machines.patroni
    assert cluster is not None, "Machines.start(..., failover=True)"
    boxes = users(mailboxes)
    add_users(machines, boxes)
    letters = corpus(n, boxes, seed=29)
    sender = Sender(machines, letters, threads)
    started = time.monotonic()
    thread = sender.start()
    while sender.accepted_letters < kill_at * n and thread.is_alive():
        time.sleep(0.05)
    old = cluster.leader()
    assert old is not None, "no primary before the fault"
    timeline = [f"{time.monotonic() - started:.1f}s: {old} lost (Patroni, PostgreSQL, etcd)"]
    killed_at = time.monotonic()
    cluster.kill(old)
    new = cluster.wait_leader(not_=old, timeout=120)
    promoted_at = time.monotonic()
    timeline.append(f"{promoted_at - started:.1f}s: {new} promoted")
    cluster.restart(old)
    thread.join()
    delivered_at = time.monotonic()
    timeline.append(f"{delivered_at - started:.1f}s: every letter delivered")
    standby = cluster.wait_sync(timeout=120)
    timeline.append(f"{time.monotonic() - started:.1f}s: {standby} the synchronous standby")
    delivery: Delivery = sender.result
    stored, problems = byte_exact(machines, NODE1, letters, boxes)
    problems += check_letters(letters, delivery, stored)
    problems += delivery.permanent  # a 5xx, or letters given up
    problems += [
        f"a {code} reply {killed_at - when:.1f} s before the primary was lost"
        for when, code in delivery.replies
        if when < killed_at
    ]
    after = [t for t in delivery.accepted_at if t > killed_at]
    if not after:
        problems.append("no letter was accepted after the failover")
    checked = fsck(machines)
    problems += fsck_problems("fsck", checked)
    return {
        "letters": n,
        "mailboxes": mailboxes,
        "deliveries_accepted": len(delivery.accepted),
        "deliveries_stored": sum(stored.values()),
        "duplicates": sum(stored.values()) - len(stored),
        "broken_transactions": sum(delivery.broken.values()),
        "failed_tries": dict(delivery.failures),
        "temporary_replies": len(delivery.replies),
        "accepted_via": dict(delivery.via),
        "old_primary": old,
        "new_primary": new,
        # Patroni's view: the standby promoted (leader key expired, then its next loop)
        "failover_seconds": round(promoted_at - killed_at, 1),
        # the loaders' view: the first 250 after the fault, and the longest wait for one
        "first_250_after_seconds": round(min(after) - killed_at, 1) if after else None,
        "longest_without_250_seconds": round(
            longest_gap(delivery.accepted_at, killed_at, delivered_at), 1
        ),
        "deliver_seconds": round(delivered_at - started, 1),
        "timeline": timeline,
        "fsck": {k: (len(v) if isinstance(v, list) else v) for k, v in checked.items()},
        "problems": problems,
    }
