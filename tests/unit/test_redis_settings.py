"""The [redis] section: what each mode accepts, what is refused (and how the message names it),
and the settings that moved there from [guard] and [shingles]."""

from __future__ import annotations

from pathlib import Path

import pytest

from pochta.config import MOVED, RedisSettings, load_settings, redis_address
from pochta.errors import ConfigError
from pochta.redisconn import describe


def test_the_default_is_one_local_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    redis = load_settings().redis
    assert (redis.mode, redis.nodes, redis.db, redis.timeout) == (
        "standalone",
        ["127.0.0.1:6379"],
        0,
        2.0,
    )
    assert redis.addresses() == [("127.0.0.1", 6379)]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('nodes = ["a:1", "b:2"]', "redis: Value error, nodes: standalone mode takes exactly one"),
        ('mode = "sentinel"\nnodes = ["a:1"]', "service: sentinel mode needs the master's name"),
        ('mode = "cluster"\ndb = 3', "db: a Redis Cluster has only database 0"),
        ('service = "main"', "service, sentinel_password: for mode = sentinel only"),
        ('nodes = ["redis://h:6379/0"]', "redis.nodes: Value error, 'redis://h:6379/0' is not"),
        ('nodes = ["h"]', "'h' is not host:port"),
        ('nodes = ["h:0"]', "'h:0' is not host:port"),
        ('nodes = ["h:65536"]', "'h:65536' is not host:port"),
        ("nodes = []", "redis.nodes: Value error, name at least one node"),
        ('mode = "cluster"\nnodes = ["/run/r.sock"]', "unix socket is for standalone mode only"),
        ('tls_ca_file = "/etc/ca.pem"', "tls_ca_file: set tls = true too"),
        ('tls = true\nnodes = ["/run/r.sock"]', "tls: not over a unix socket"),
        ('mode = "replicas"', "redis.mode: Input should be"),
        ("timeout = 0", "redis.timeout: Input should be greater than 0"),
        ("url = 'redis://h'", "redis.url: unknown setting"),
    ],
)
def test_settings_that_do_not_fit_their_mode_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str, needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pochta.toml").write_text(f"[redis]\n{body}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert needle in caught.value.message
    assert "(from pochta.toml)" in caught.value.message


@pytest.mark.parametrize(
    "body",
    [
        'mode = "cluster"\nnodes = ["10.0.0.1:7000", "10.0.0.2:7000"]',
        'mode = "sentinel"\nnodes = ["[::1]:26379", "s2:26379"]\nservice = "main"\ndb = 2',
        'nodes = ["/run/redis/redis.sock"]\ndb = 5',
        'nodes = ["r:6380"]\ntls = true\ntls_ca_file = "/etc/ca.pem"\nusername = "pochta"',
    ],
)
def test_each_mode_takes_its_own_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pochta.toml").write_text(f"[redis]\n{body}\n")
    redis = load_settings().redis
    assert len(redis.addresses()) == len(redis.nodes)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_setting_is_refused_with_its_new_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, old: str
) -> None:
    monkeypatch.chdir(tmp_path)
    section, key = old.split(".")
    (tmp_path / "pochta.toml").write_text(f"[{section}]\n{key} = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"{old}: moved to {MOVED[old]}" in caught.value.message
    assert "(from pochta.toml)" in caught.value.message
    (tmp_path / "pochta.toml").unlink()
    variable = f"POCHTA_{section.upper()}__{key.upper()}"
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"environment variable {variable} names no setting: moved to {MOVED[old]}" in str(
        caught.value
    )


def test_addresses() -> None:
    assert redis_address("[::1]:6379") == ("::1", 6379)
    assert redis_address("redis.internal:7000") == ("redis.internal", 7000)
    assert redis_address("/run/redis.sock") == "/run/redis.sock"
    for bad in ("", ":6379", "h:", "h:x", "h:-1"):
        with pytest.raises(ValueError, match="is not host:port"):
            redis_address(bad)


def test_the_password_is_never_shown() -> None:
    settings = RedisSettings(
        mode="sentinel",
        nodes=["s1:26379"],
        service="main",
        password="node-password-123",  # type: ignore[arg-type]  # pydantic makes it a SecretStr
        sentinel_password="sentinel-password-456",  # type: ignore[arg-type]
    )
    for shown in (describe(settings), repr(settings), str(settings)):
        assert "password-123" not in shown and "password-456" not in shown
    assert describe(settings) == "the master 'main' of the sentinels at s1:26379"
