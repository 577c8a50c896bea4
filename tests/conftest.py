"""Fixtures shared by every test directory, and the password cost of the tests' pochtas."""

import os

from tests.nginx import nginx_factory  # noqa: F401  (fixture)
from tests.pgserver import (  # noqa: F401  (fixtures)
    new_postgres_db,
    postgres_dsn,
    postgres_server,
)
from tests.servers import (  # noqa: F401  (fixtures)
    redis_client,
    redis_cluster,
    redis_cluster_client,
    redis_factory,
    redis_server,
)

# The pochtas the tests build and start (in this process and as subprocesses, which inherit
# the environment) hash passwords at a test cost: argon2id with 1 pass over 64 KiB in 1 lane,
# well under a millisecond, where the production cost (3 passes over 64 MiB, 4 lanes) takes
# ~0.24 s of CPU per hash and per check; the suite creates and logs in accounts by the
# thousand. What the production cost itself does is tested with it set explicitly
# (tests/unit/guard/test_passwords.py); a test may set these variables itself.
TEST_PASSWORD_COST = {
    "POCHTA_GUARD__PASSWORD_TIME_COST": "1",
    "POCHTA_GUARD__PASSWORD_MEMORY_KIB": "64",
    "POCHTA_GUARD__PASSWORD_LANES": "1",
}
for _name, _value in TEST_PASSWORD_COST.items():
    os.environ.setdefault(_name, _value)

# Their letters' fork servers do not warm the phrase families' set (pochta.mailbox.warmed:
# ~0.5 s of CPU at every start of a pool, and the suite starts `pochta serve` by the hundred,
# most of them never judging a letter); tests/unit/test_intake.py sets it for its own.
os.environ.setdefault("POCHTA_WARM_WORDS", "0")
