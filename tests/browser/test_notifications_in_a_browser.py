"""The notification settings in Chromium: choose moments, set a team webhook, see a refusal by its field."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from notifications import outbound
from notifications.models import Subscription, TeamWebhook
from tests.browser.conftest import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_lead_chooses_moments_and_sets_the_webhook(log_in, lead, maps, settings, shot, monkeypatch):
    settings.WEBHOOK_ALLOW_HTTP = settings.WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setattr(outbound, "addresses", lambda host, port: ["93.184.215.14"])  # no DNS needed
    page = log_in(lead, "/notifications/")
    page.check("#id_own-on_preempt")
    page.check("#id_team-maps-on_success")
    page.click("text=Save >> nth=0")
    expect(page.locator(".flash, .messages").first).to_contain_text("Saved")
    assert Subscription.objects.get(user=lead, team=None).on_preempt
    page.fill("#id_maps-url", "http://hooks.example.com/x")
    page.click("text=Save the webhook of maps")
    expect(page.locator("#field-maps-url .field-error")).to_contain_text("Use an https:// URL")
    shot(page, "notifications-webhook-error")
    page.fill("#id_maps-url", "https://hooks.example.com/x")
    page.click("text=Save the webhook of maps")
    expect(page.locator(".flash, .messages").first).to_contain_text("Webhook of team maps saved")
    assert TeamWebhook.objects.get(team=maps).on_fail  # failures are on by default
    shot(page, "notifications")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_admin_s_webhook_forms_read_as_one_block_per_team(page_at, staff, maps, vision, viewport, shot):
    page = sign_in(page_at(viewport), staff, "/notifications/")
    forms = page.locator("form.webhook")
    expect(forms).to_have_count(2)
    shot(page, f"notifications-admin-{'phone' if viewport is PHONE else 'desktop'}")
    first_button = forms.nth(0).locator("button").bounding_box()
    second = forms.nth(1).bounding_box()
    second_name = forms.nth(1).locator("h3").bounding_box()
    # A clear gap and a rule between maps' Save button and vision's name: the next form starts below
    # the button with room to spare, and draws its top border.
    assert second_name["y"] - (first_button["y"] + first_button["height"]) >= 24
    assert second["y"] > first_button["y"] + first_button["height"]
    assert forms.nth(1).evaluate("form => getComputedStyle(form).borderTopStyle") == "solid"
    assert forms.nth(0).evaluate("form => getComputedStyle(form).borderTopStyle") == "none"
