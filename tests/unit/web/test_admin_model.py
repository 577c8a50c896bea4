"""/admin/model: the live model, its figures, the versions kept and the learning state; only
for admins; a promotion shows once the loader has switched."""

from __future__ import annotations

import dataclasses
import time

from tests.unit.web.conftest import Site

from pochta.antispam.model import booster
from pochta.antispam.model import store as store_mod

FIGURES = {
    "letters": {"ham": 40, "spam": 60},
    "folds": 5,
    "new": {"spam_caught": 0.9833, "ham_in_spam": 0.025},
    "live": {"spam_caught": 0.9, "ham_in_spam": 0.05},
    "live_version": None,
}


def test_the_model_page_shows_the_shipped_model_then_a_promoted_version(fresh_site: Site) -> None:
    site = fresh_site
    alice = site.as_user(site.login("alice@example.org"))
    assert alice.get("/admin/model").status_code == 403
    root = site.as_user(site.login("root@example.org"))
    page = root.get("/admin/model")
    assert page.status_code == 200
    assert "The model shipped with pochta is live" in page.text
    assert 'id="no-versions"' in page.text
    assert "words learned" in page.text  # the installation's learned words, at 0

    pochta = site.pochta
    shipped = booster.load()
    assert shipped is not None
    files = store_mod.files_of(dataclasses.replace(shipped, threshold=0.63), FIGURES)
    pochta.models.put("v-2026", files, created=time.time())
    listed = root.get("/admin/model").text
    assert 'data-version="v-2026"' in listed and "98.33 %" in listed
    assert "The model shipped with pochta is live" in listed  # written, not promoted

    pochta.models.promote("v-2026")
    assert pochta.live_model.check(force=True)
    page = root.get("/admin/model")
    assert "Live version <code>v-2026</code>" in page.text
    assert 'id="figures"' in page.text and "2.50 %" in page.text and "5.00 %" in page.text
    assert "0.630" in page.text
