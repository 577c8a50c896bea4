"""Fixtures of the phishing, authentication and rules tests (helpers: ``helpers.py``)."""

from __future__ import annotations

import pytest
from tests.unit.antispam_phishing.helpers import Key, make_key


@pytest.fixture(scope="session")
def key() -> Key:
    """One 2048-bit RSA key for every DKIM signature of a test run."""
    return make_key()
