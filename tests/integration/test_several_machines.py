"""README's "Several machines" recipe on real "machines": Linux network namespaces on this host
(tests/netns.py), each with its own address on 10.77.0.0/24, joined by a bridge of their own.

    db     10.77.0.1   PostgreSQL under Patroni (listening on its address, pg_hba for the
                       subnet), the primary at first; an etcd member; a Redis Cluster master
                       and the replica of node2's
    db2    10.77.0.4   PostgreSQL under Patroni, the synchronous standby; an etcd member
    node1  10.77.0.2   nginx WebDAV node (disk1, disk2), `pochta valkyrie run --disk` per
                       disk, a loader (`pochta serve`), a Redis Cluster master and the replica
                       of db's, an etcd member
    node2  10.77.0.3   nginx, Valkyries, a loader, a Redis Cluster master and node1's replica
    admin  10.77.0.9   `pochta db upgrade / init / pairs add / fsck`, pg_dump, the SMTP client

The loaders and storage hosts use README's TOML blocks as they are. Pairs join disk1 of one
node to disk1 of the other (and disk2 the other way round). A corpus goes over SMTP through
both loaders at once; one loader is SIGKILLed and one storage node killed and started again
on the way, then the PostgreSQL primary's host is lost (its Patroni, PostgreSQL and etcd
member SIGKILLed: the standby is promoted, the lost host comes back as the standby), the
client trying each letter that got no 250 again through the other loader.
Then: every letter that got a 250 is read back byte for byte over the surviving loader's HTTP
API, each attachment is on both nodes (the files in the directories behind the two nginx),
`pochta fsck` finds nothing lost and every counter exact, and a pg_dump restored into a new
database passes fsck too (README's backup recipe). Last, the backup drill
(tests/several_backup.py; the servers archive WAL from the start): `pochta backup create`
between batches of letters, the database lost, restored to a point in time on the db host,
`pochta fsck --disks --manifest` against it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests import netns, patroni, several, several_backup, several_faults
from tests.machines import NODE1, NODE2, Machines

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LETTERS = int(os.environ.get("POCHTA_SEVERAL_LETTERS", "400"))
FAULT_SECONDS = float(os.environ.get("POCHTA_SEVERAL_FAULT_SECONDS", "75"))
# the schedule's seed here: its first round's order puts first every kind the recipe's test
# does not apply already (that one kills a loader and the primary): a frozen primary (stop
# primary, 5.4 s: below Patroni's ttl), a Redis master stopped and one killed, the three
# cuts, the full disk, nginx stopped and killed, a loader stopped; those 10 faults and no
# more (the 11th and 12th would be the slow kill loader and kill primary) take about as long
# as seed 30's first 7, which had neither kill redis nor stop primary
SEED = int(os.environ.get("POCHTA_SEVERAL_SEED", "12034"))
MAX_FAULTS = int(os.environ.get("POCHTA_SEVERAL_MAX_FAULTS", "10"))
# every kind but "freeze postgres" (PostgreSQL alone frozen past answer_timeout and Patroni's ttl,
# 15 s at least): with Debian 12's Patroni 3.0.2 it ends in two primaries and acknowledged letters
# lost (BENCHMARKS.md, issue 30's last gaps), so it is run by scripts/several-machines only; left
# out, the twelve kinds keep seed 12034's order, durations and targets as they were
CI_KINDS = tuple(k for k in several_faults.KINDS if k != "freeze postgres")


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machines]:
    """One set of machines for the module (building them takes a minute or two): the recipe's
    run, then the fault schedule on what it left."""
    tmp_path = tmp_path_factory.mktemp("several")
    why = netns.unavailable()
    if why is not None:
        pytest.skip(f"no network namespaces here: {why}")
    why = patroni.missing()
    if why is not None:
        pytest.skip(why)
    try:
        started = several_faults.FaultMachines.start(
            tmp_path / "machines",
            failover=True,
            archive=True,  # archive: the backup drill
        )
    except RuntimeError as exc:
        if "is not installed" in str(exc):
            pytest.skip(str(exc))
        raise
    try:
        yield started
    finally:
        started.stop()


def test_the_recipe_survives_a_loader_a_node_and_the_primary_lost(machines: Machines) -> None:
    summary = several.run(machines, LETTERS)
    shown = json.dumps({**summary, "problems": summary["problems"][:20]}, indent=1)
    assert summary["problems"] == [], f"{shown}\n{machines.logs()}"
    # both loaders delivered, and the faults were met: broken or refused connections to
    # the killed loader, 451s while the node was down, then retried through the survivor
    assert set(summary["accepted_via"]) == {
        machines.address(NODE1),
        machines.address(NODE2),
    }, shown
    assert summary["retried_jobs"] > 0 and summary["failed_tries"], shown
    assert summary["deliveries_stored"] >= summary["deliveries_accepted"] > LETTERS, shown
    assert summary["fsck"]["ok"] and summary["fsck"]["lost"] == 0, shown
    assert summary["fsck"]["letters"] == summary["deliveries_stored"], shown
    assert summary["fsck_restored"]["ok"], shown
    assert summary["attachments_checked"] > 10, shown
    # the primary's host lost: the standby was promoted within seconds (Patroni's ttl, then
    # its next loop), and the letters answered 250 meanwhile are all there (above)
    assert summary["primaries"] is not None, shown
    assert summary["primaries"][0] != summary["primaries"][1], shown
    assert summary["failover_seconds"] < 30, shown
    assert not machines.loaders[NODE1].alive() and machines.loaders[NODE2].alive()
    assert machines.nodes[NODE2].alive()


def test_a_seeded_fault_schedule_loses_no_acknowledged_letter(machines: Machines) -> None:
    """tests/several_faults.py with ``SEED`` for 75 s at most: the first ``MAX_FAULTS``
    faults of its first round (ten of the twelve kinds, each held at most 8 s; a Redis master
    killed is replaced by its replica), then the checker, the shingle counters against the
    truth included."""
    assert isinstance(machines, several_faults.FaultMachines)
    for name in (NODE1, NODE2):  # the recipe's test left a loader killed
        if not machines.loaders[name].alive():
            machines._start_loader(name)
    summary = several_faults.run(
        machines, seed=SEED, seconds=FAULT_SECONDS, rate=3.0, max_faults=MAX_FAULTS,
        kinds=CI_KINDS,
    )  # fmt: skip
    shown = json.dumps({**summary, "problems": summary["problems"][:20]}, indent=1)
    print(shown)  # the verdict and the timeline, for `pytest -rP`
    assert summary["problems"] == [], f"{shown}\n{machines.logs()}"
    assert summary["faults_applied"] >= 4, shown
    assert summary["lost"] == 0, shown
    assert summary["duplicated"] == summary["duplicated_after_a_lost_250"], shown
    assert summary["deliveries_accepted"] > 100, shown
    assert summary["fsck"]["ok"], shown
    # the shingle counters were compared with the letters delivered (problems: none unexplained)
    assert summary["shingles"]["letters"] > 50, shown
    assert summary["shingles"]["exact"] > summary["shingles"]["letters"] // 2, shown


def test_the_backup_drill_restores_to_a_point_in_time(machines: Machines) -> None:
    """Last (it loses the database for good): 3 x 20 letters through both loaders, a base
    backup between the first two batches, the restore point T between the last two; both
    Patroni hosts lost, the backup restored to T into a new directory on the db host under a
    plain PostgreSQL; every letter acknowledged before T read back byte for byte by a fresh
    loader, none after T, and fsck exit 1 listing each file of a letter after T."""
    for name in (NODE1, NODE2):  # the fault schedule leaves both up; alone, nothing to do
        if not machines.loaders[name].alive():
            machines._start_loader(name)
    summary = several_backup.run(machines, per_batch=20)
    shown = json.dumps({**summary, "problems": summary["problems"][:20]}, indent=1)
    print(shown)
    assert summary["problems"] == [], f"{shown}\n{machines.logs()}"
    assert summary["restored_byte_exact"] == summary["acknowledged_before_t"] == 40, shown
    assert summary["after_t_restored"] == 0, shown
    assert summary["after_t_reported_by_fsck"] == summary["after_t"] == 20, shown
    assert summary["fsck"]["exit"] == 1 and summary["fsck"]["lost"] == 0, shown
