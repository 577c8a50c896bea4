"""A lock holder in its own process, driven by tests/integration/guard/test_locks.py.

    python holder.py redis PORT RESOURCE | python holder.py sqlite DBFILE RESOURCE

Takes lock "job" with a 0.5 s lease, writes RESOURCE through the fence and prints its token;
then, for each line on stdin, reports what it believes and what the fence says.
"""

from __future__ import annotations

import sys
from pathlib import Path

import redis

from pochta.errors import LeaseLost, StaleToken
from pochta.guard.lock import Locks
from pochta.guard.lock.redis import RedisFence, RedisLockBackend
from pochta.guard.lock.sqlite import SqliteFence, SqliteLockBackend
from pochta.types import Fence, LockBackend


def say(*words: object) -> None:
    print(*words, flush=True)


def main(kind: str, where: str, resource: str) -> None:
    backend: LockBackend
    fence: Fence
    if kind == "redis":
        client = redis.Redis(host="127.0.0.1", port=int(where))
        backend, fence = RedisLockBackend(client), RedisFence(client)
    else:
        backend, fence = SqliteLockBackend(Path(where)), SqliteFence(Path(where))
    locks = Locks(backend, ttl=0.5)
    lease = locks.acquire("job", timeout=5, on_lost=lambda _: say("lost"))
    fence.write(resource, lease.token, b"holder")
    say("token", lease.token)
    sys.stdin.readline()
    say("held" if lease.is_held() else "not-held")
    try:
        fence.write(resource, lease.token, b"holder, late")
        say("written")
    except StaleToken:
        say("refused")
    try:
        lease.release()
        say("released")
    except LeaseLost:
        say("release-lost")


if __name__ == "__main__":
    main(*sys.argv[1:4])
