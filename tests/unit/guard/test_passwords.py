"""Password hashing: the cost an installation sets (``[guard] password_*``), the production
default, hashes of another cost still verifying, and the dummy hash an unknown account is
checked against made at the same cost as a real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pochta.app import build
from pochta.config import load_settings
from pochta.errors import ConfigError, InvalidCredentials
from pochta.guard.passwords import DEFAULT, Cost, Passwords


def params(hashed: str) -> str:
    return hashed.split("$")[3]  # $argon2id$v=19$m=...,t=...,p=...$salt$hash


def test_the_default_is_rfc_9106s_second_option() -> None:
    assert params(DEFAULT.hash("correct horse battery")) == "m=65536,t=3,p=4"


def test_a_cost_makes_its_hashes_and_reads_any_other() -> None:
    cheap = Passwords(Cost(time=1, memory_kib=64, lanes=1))
    made = cheap.hash("correct horse battery")
    assert params(made) == "m=64,t=1,p=1"
    assert cheap.verify(made, "correct horse battery")
    assert not cheap.verify(made, "wrong horse battery")
    assert DEFAULT.verify(made, "correct horse battery")  # the parameters are in the hash
    assert cheap.verify(DEFAULT.hash("staple"), "staple")
    assert cheap.needs_rehash(DEFAULT.hash("staple")) and not cheap.needs_rehash(made)
    assert not cheap.verify("not a hash", "staple")


def test_the_dummy_hash_costs_what_a_real_one_does() -> None:
    cheap = Passwords(Cost(time=2, memory_kib=128, lanes=2))
    assert params(cheap.dummy()) == "m=128,t=2,p=2"
    assert cheap.dummy() == cheap.dummy()  # made once


def test_the_settings_choose_the_cost_of_new_accounts(tmp_path: Path) -> None:
    pochta = build(
        load_settings(
            data_dir=tmp_path,
            antispam={"pool_processes": 0},
            guard={"password_time_cost": 2, "password_memory_kib": 256, "password_lanes": 2},
        )
    )
    try:
        user = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        assert params(user.password_hash) == "m=256,t=2,p=2"
        assert pochta.mailbox.users.check_password("ann@example.org", "a long enough password")
        with pytest.raises(InvalidCredentials):
            pochta.mailbox.users.check_password("nobody@example.org", "a long enough password")
        assert params(pochta.mailbox.users.passwords.dummy()) == "m=256,t=2,p=2"
    finally:
        pochta.close()


@pytest.mark.parametrize(
    "guard",
    [
        {"password_memory_kib": 16, "password_lanes": 4},  # argon2 needs 8 KiB a lane
        {"password_time_cost": 0},
        {"password_lanes": 0},
    ],
)
def test_a_cost_argon2_cannot_take_is_a_settings_error(guard: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match="password_"):
        load_settings(guard=guard)
