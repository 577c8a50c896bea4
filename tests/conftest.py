"""Fixtures shared by every test directory."""

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
