"""API tokens in a real Chromium: a lead creates one, sees it once, uses it with the API, then revokes it."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.conftest import spec_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def api(live_server, path: str, token: str, body: dict | None = None) -> int:
    """The HTTP status of one API call with the token, as CI would make it."""
    request = urllib.request.Request(
        live_server.url + path, data=json.dumps(body).encode() if body else None, method="POST" if body else "GET",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_lead_creates_a_token_sees_it_once_uses_it_and_revokes_it(log_in, lead, maps, live_server, shot):
    page = log_in(lead, "/teams/maps/")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("text=API tokens")
    expect(page.locator(".empty")).to_contain_text("No tokens yet")
    page.fill("#id_name", "ci-main")
    page.select_option("#id_max_tier", label="standard")
    page.click("text=Create token")

    secret = page.locator("#new-token")
    expect(secret).to_have_value(re.compile(r"^gw_\S{20,}$"))
    expect(page.locator(".secret")).to_contain_text("will not be shown again")
    expect(page.locator("#token-list tbody tr")).to_have_count(1)
    expect(page.locator("#token-list")).to_contain_text("never")
    value = secret.input_value()
    page.click("[data-copy]")
    expect(page.locator("[data-copy]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == value
    shot(page, "tokens-created")

    assert api(live_server, "/api/v1/jobs/", value, spec_data(name="from-ci")) == 201
    page.reload()
    expect(page.locator("#new-token")).to_have_count(0)
    assert value not in page.content()
    expect(page.locator("#token-list tbody tr").first).not_to_contain_text("never")  # last used just now

    page.once("dialog", lambda dialog: dialog.accept() if "Revoke token ci-main" in dialog.message else dialog.dismiss())
    page.click("#token-list button:has-text('Revoke')")
    expect(page.locator("#token-list .badge")).to_have_text("revoked")
    expect(page.locator("#token-list button:has-text('Revoke')")).to_have_count(0)
    shot(page, "tokens-revoked")
    assert api(live_server, "/api/v1/jobs/", value) == 401
