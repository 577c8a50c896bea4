"""Login limits that stop attackers, not offices (issue 21): real Users (argon2id, SQLite
index) behind a LoginGuard on the embedded limiter, with an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pochta.app import Pochta, build
from pochta.cli import app as cli
from pochta.config import load_settings
from pochta.errors import InvalidCredentials, RateLimited

PASSWORD = "correct horse battery"
OFFICE_IP = "203.0.113.7"


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    # small limits so that the tests stay short; the proportions are the defaults'
    p = build(
        load_settings(
            data_dir=tmp_path / "data",
            guard={"login_ip_max": 5, "login_account_max": 3, "login_ip_success_max": 100},
        )
    )
    try:
        for i in range(8):
            p.mailbox.add_user(f"user{i}@example.org", PASSWORD)
        yield p
    finally:
        p.close()


def test_an_office_behind_one_nat_is_never_locked_out(pochta: Pochta) -> None:
    """Issue 21: successful logins counted toward the per-IP limit, so a few good logins and
    some typos from one address locked everyone behind it out."""
    for round_ in range(5):  # 40 good logins from one IP: 8 times the failure limit
        for i in range(8):
            pochta.mailbox.login(f"user{i}@example.org", PASSWORD, OFFICE_IP)
        if round_ < 4:  # and a typo now and then (4 in all: under the limit of 5)
            with pytest.raises(InvalidCredentials):
                pochta.mailbox.login(f"user{round_}@example.org", "typo", OFFICE_IP)
    pochta.mailbox.login("user7@example.org", PASSWORD, OFFICE_IP)


def test_wrong_passwords_from_one_ip_are_stopped(pochta: Pochta) -> None:
    for i in range(5):  # spraying: one guess at each of several accounts
        with pytest.raises(InvalidCredentials):
            pochta.mailbox.login(f"user{i}@example.org", "123456", "198.51.100.1")
    with pytest.raises(RateLimited) as limited:
        pochta.mailbox.login("user5@example.org", PASSWORD, "198.51.100.1")
    assert limited.value.retry_after > 0
    pochta.mailbox.login("user5@example.org", PASSWORD, OFFICE_IP)  # other IPs go on


def test_wrong_passwords_against_one_account_from_many_ips_are_stopped(pochta: Pochta) -> None:
    for i in range(3):
        with pytest.raises(InvalidCredentials):
            pochta.mailbox.login("user0@example.org", f"guess{i}", f"192.0.2.{i}")
    with pytest.raises(RateLimited):
        pochta.mailbox.login("user0@example.org", "guess", "192.0.2.99")
    pochta.mailbox.login("user1@example.org", PASSWORD, "192.0.2.99")  # other accounts go on


def test_unknown_accounts_are_charged_like_real_ones(pochta: Pochta) -> None:
    for i in range(3):
        with pytest.raises(InvalidCredentials):
            pochta.mailbox.login("ghost@example.org", "x", f"192.0.2.{i}")
    with pytest.raises(RateLimited):
        pochta.mailbox.login("Ghost@Example.org ", "x", "192.0.2.50")


def test_successes_are_limited_at_a_much_higher_rate(tmp_path: Path) -> None:
    p = build(load_settings(data_dir=tmp_path / "data", guard={"login_ip_success_max": 3}))
    try:
        p.mailbox.add_user("a@example.org", PASSWORD)
        for _ in range(3):
            p.mailbox.login("a@example.org", PASSWORD, "198.51.100.9")
        with pytest.raises(RateLimited):
            p.mailbox.login("a@example.org", PASSWORD, "198.51.100.9")
    finally:
        p.close()


def test_guard_reset_lifts_a_limit(pochta: Pochta, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    for i in range(3):
        with pytest.raises(InvalidCredentials):
            pochta.mailbox.login("user0@example.org", "guess", f"192.0.2.{i}")
    for i in range(5):
        with pytest.raises((InvalidCredentials, RateLimited)):
            pochta.mailbox.login(f"user{i + 1}@example.org", "guess", "198.51.100.1")
    with pytest.raises(RateLimited):
        pochta.mailbox.login("user0@example.org", PASSWORD, OFFICE_IP)
    with pytest.raises(RateLimited):
        pochta.mailbox.login("user6@example.org", PASSWORD, "198.51.100.1")
    runner = CliRunner()
    data = str(tmp_path / "data")
    done = runner.invoke(cli, ["guard", "reset", "--account", "User0@example.org", "--data", data])
    assert done.exit_code == 0, done.output
    assert "lifted for account User0@example.org" in done.stdout
    pochta.mailbox.login("user0@example.org", PASSWORD, OFFICE_IP)
    done = runner.invoke(cli, ["guard", "reset", "--ip", "198.51.100.1", "--data", data, "--json"])
    assert done.exit_code == 0 and '"reset": true' in done.stdout
    pochta.mailbox.login("user6@example.org", PASSWORD, "198.51.100.1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--ip ADDRESS and/or --account EMAIL"),
        (["--ip", "300.1.1.1"], "not an IP address"),
        (["--account", "nobody"], "not an e-mail address"),
    ],
)
def test_guard_reset_refuses_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    done = CliRunner().invoke(cli, ["guard", "reset", *args, "--data", str(tmp_path / "d")])
    assert done.exit_code == 2
    assert message in done.stderr and "Traceback" not in done.output
