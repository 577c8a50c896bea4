"""Known clients on Redis (one server, Sentinel, Cluster; through ``pochta.redisconn``): a mark
is a key that Redis expires itself; the keys of one call share a hash tag
(``pochta.guard.known.KnownClients``), so one script reads or writes them all."""

from __future__ import annotations

from collections.abc import Sequence

from pochta.errors import GuardUnavailable
from pochta.redisconn import Script, Scripts, SyncClient


class RedisKnownClients:
    """``KnownClientsBackend`` on a sync ``redis.Redis`` or ``redis.RedisCluster``."""

    # KEYS the marks; returns {1 or 0 per key: it exists (an expired key does not)}
    KNOWN = Script(
        """
local found = {}
for i = 1, #KEYS do found[i] = redis.call('EXISTS', KEYS[i]) end
return found
"""
    )

    # KEYS the marks; ARGV[1] their lifetime (ms); returns how many were set
    REMEMBER = Script(
        """
for i = 1, #KEYS do redis.call('SET', KEYS[i], '1', 'PX', ARGV[1]) end
return #KEYS
"""
    )

    # KEYS the marks; returns how many were deleted
    FORGET = Script("return redis.call('DEL', unpack(KEYS))")

    def __init__(self, client: SyncClient) -> None:
        self.io = Scripts(client, GuardUnavailable)

    def known(self, keys: Sequence[str]) -> list[bool]:
        if not keys:
            return []
        return [int(x) == 1 for x in self.io.run(self.KNOWN, keys, ())]

    def remember(self, keys: Sequence[str], ttl: float) -> None:
        if keys:
            self.io.run(self.REMEMBER, keys, [str(max(1, round(ttl * 1000)))])

    def forget(self, keys: Sequence[str]) -> None:
        if keys:
            self.io.run(self.FORGET, keys, ())

    def close(self) -> None:
        self.io.close()
