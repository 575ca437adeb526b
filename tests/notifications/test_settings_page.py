"""The notification settings page: a person's e-mail choices, a team's webhook (its leads'), what was sent, and
the notices that an API token expires sent to the person."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobEvent
from notifications import outbound
from notifications.models import Delivery, Subscription, TeamWebhook, TokenNotice
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db

URL = "/notifications/"


def webhook_post(url="https://hooks.example.com/T0/B0/x", **flags) -> dict:
    return {"maps-url": url, **{f"maps-{flag}": "on" for flag, on in flags.items() if on}}


@pytest.mark.parametrize("persona, status", [("owner", 200), ("lead", 200), ("outsider", 200), ("staff", 200), (None, 302)])
def test_access_to_the_page(request, login, persona, status):
    user = request.getfixturevalue(persona) if persona else None
    assert login(user).get(URL).status_code == status


def test_it_saves_own_and_team_choices(login, owner, maps):
    response = login(owner).post(URL, {"own-on_fail": "on", "own-on_preempt": "on", "team-maps-on_success": "on"})
    assert response.status_code == 302
    own = Subscription.objects.get(user=owner, team=None)
    team = Subscription.objects.get(user=owner, team=maps)
    assert (own.on_fail, own.on_preempt, own.on_start, own.on_success) == (True, True, False, False)
    assert (team.on_fail, team.on_success) == (False, True)
    body = login(owner).get(URL).content.decode()
    assert 'name="own-on_fail" id="id_own-on_fail" checked' in body


def test_unchecking_everything_removes_the_subscription(login, owner, maps):
    Subscription.objects.create(user=owner, team=maps, on_fail=True)
    login(owner).post(URL, {})
    assert not Subscription.objects.exists()


def test_a_person_cannot_subscribe_to_a_team_they_are_not_in(login, outsider, maps):
    login(outsider).post(URL, {"team-maps-on_fail": "on", "own-on_fail": "on"})
    assert list(Subscription.objects.values_list("team", flat=True)) == [None]


def test_a_lead_sets_and_removes_the_teams_webhook(login, lead, maps):
    response = login(lead).post("/notifications/webhooks/maps/", webhook_post(on_fail=True, on_preempt=True))
    assert response.status_code == 302
    hook = TeamWebhook.objects.get(team=maps)
    assert (hook.url, hook.on_fail, hook.on_preempt, hook.on_start, hook.updated_by) == (
        "https://hooks.example.com/T0/B0/x", True, True, False, lead)
    login(lead).post("/notifications/webhooks/maps/", webhook_post(url=""))
    assert not TeamWebhook.objects.exists()


def test_a_plain_http_webhook_is_refused_unless_allowed(login, lead, maps, settings):
    settings.WEBHOOK_ALLOW_HTTP = False
    response = login(lead).post("/notifications/webhooks/maps/", webhook_post(url="http://hooks.example.com/x"))
    assert response.status_code == 422 and "Use an https:// URL" in response.content.decode()
    assert not TeamWebhook.objects.exists()


@pytest.mark.parametrize("persona, status", [("member", 403), ("outsider", 404), ("staff", 302), ("lead", 302)])
def test_only_leads_and_staff_set_a_webhook(request, login, maps, persona, status):
    response = login(request.getfixturevalue(persona)).post("/notifications/webhooks/maps/", webhook_post(on_fail=True))
    assert response.status_code == status
    assert TeamWebhook.objects.exists() == (status == 302)


def test_the_page_lists_what_was_sent_to_the_person_only(login, owner, outsider, submit):
    job = submit()
    event = job.events.get()
    Delivery.objects.create(event=event, job=job, channel="email", target="owner@example.com", user=owner,
                            state="failed", attempts=6, error="Could not send the e-mail: refused")  # fmt: skip
    assert "Could not send the e-mail: refused" in login(owner).get(URL).content.decode()
    body = login(outsider).get(URL).content.decode()
    assert "Nothing sent yet" in body and job.name not in body


def test_a_message_about_a_team_left_since_names_the_job_without_a_link(login, owner, submit, maps):
    job = submit()
    Delivery.objects.create(event=job.events.get(), job=job, channel="email", target="owner@example.com", user=owner,
                            state="sent")  # fmt: skip
    assert f'href="/jobs/{job.pk}/"' in login(owner).get(URL).content.decode()
    owner.memberships.all().delete()
    body = login(owner).get(URL).content.decode()
    assert job.name in body and f'href="/jobs/{job.pk}/"' not in body


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.3.4", "169.254.169.254", "::1", "::ffff:192.168.1.9",
                                     "100.64.0.1", "fd00::5"])  # fmt: skip
def test_a_webhook_on_a_private_or_local_network_is_refused(client, login, lead, settings, monkeypatch, address):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setattr(outbound, "addresses", lambda host, port: ["93.184.215.14", address])
    login(lead)
    response = client.post("/notifications/webhooks/maps/", webhook_post("https://hooks.example.com/T0/B0/x"))
    assert response.status_code == 422
    assert (f"hooks.example.com is on a private or local network ({address}); a webhook must be an address on "
            "the internet, such as Slack&#x27;s.") in response.content.decode()  # fmt: skip
    assert not TeamWebhook.objects.exists()


def test_a_webhook_host_that_does_not_resolve_is_refused(client, login, lead, settings, monkeypatch):
    settings.WEBHOOK_ALLOW_PRIVATE = False

    def unknown(host, port):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(outbound, "addresses", unknown)
    login(lead)
    response = client.post("/notifications/webhooks/maps/", webhook_post("https://hooks.nowhere.invalid/x"))
    assert response.status_code == 422
    assert "Could not find the host hooks.nowhere.invalid; check the URL." in response.content.decode()


def test_each_delivery_of_a_digest_is_listed_saying_it_went_out_in_one(login, owner, submit):
    jobs = [submit(name=f"trial-{i}") for i in range(3)]
    for job in jobs:
        Delivery.objects.create(event=job.events.get(), job=job, channel="email", target="owner@example.com",
                                user=owner, state="sent", attempts=1, digest_size=3)  # fmt: skip
    alone = submit(name="alone")
    Delivery.objects.create(event=alone.events.get(), job=alone, channel="email", target="owner@example.com",
                            user=owner, state="sent", attempts=1, digest_size=1)  # fmt: skip
    body = login(owner).get(URL).content.decode()
    assert all(f"trial-{i} #{job.pk}" in body for i, job in enumerate(jobs))
    assert body.count("in a digest of 3") == 3 and "in a digest of 1" not in body


def test_the_page_lists_the_newest_20_of_the_persons_messages_and_of_the_webhooks_of_the_teams_they_lead(
        login, lead, owner, outsider, staff, submit, vision):
    job, other = submit(), submit(team=vision, user=outsider)
    now = timezone.now()

    def sent(job, channel, target, user, minutes_ago) -> int:
        event = JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom")
        delivery = Delivery.objects.create(event=event, job=job, channel=channel, target=target, user=user,
                                           state="sent")  # fmt: skip
        Delivery.objects.filter(pk=delivery.pk).update(created_at=now - timedelta(minutes=minutes_ago))
        return delivery.pk

    to_lead = [sent(job, "email", "lead@example.com", lead, m) for m in range(0, 30, 2)]
    maps_hook = [sent(job, "webhook", "https://hooks.example.com/maps", None, m) for m in range(1, 30, 2)]
    vision_hook = [sent(other, "webhook", "https://hooks.example.com/vision", None, m) for m in range(10)]
    to_owner = [sent(job, "email", "owner@example.com", owner, m) for m in range(3)]

    def listed(user) -> list[int]:
        return [delivery.pk for delivery in login(user).get(URL).context["deliveries"]]

    def newest(*pks) -> list[int]:
        latest = Delivery.objects.filter(pk__in=pks).order_by("-created_at", "-id")
        return list(latest.values_list("pk", flat=True)[:20])

    assert listed(lead) == newest(*to_lead, *maps_hook)
    assert listed(staff) == newest(*maps_hook, *vision_hook)  # staff lead every team
    assert listed(owner) == to_owner  # a member who leads no team: their own only
    assert listed(outsider) == []


@pytest.mark.parametrize("port", ["99999", "65536"])
def test_a_webhook_url_with_a_port_out_of_range_is_refused_in_words(client, login, lead, settings, port):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    login(lead)
    response = client.post("/notifications/webhooks/maps/", webhook_post(f"https://hooks.example.com:{port}/x"))
    assert response.status_code in (400, 422)
    assert not TeamWebhook.objects.exists()


def test_the_page_lists_the_token_notices_sent_to_the_person_beside_their_other_messages(login, owner, lead, maps):
    laptop, _ = token_create(name="laptop", user=owner, days=30)
    ci, _ = token_create(name="ci-main", team=maps, actor=owner, days=90)
    sent_at = timezone.now() - timedelta(hours=3)
    TokenNotice.objects.create(token=laptop, kind="soon", user=owner, state="sent", attempts=1, sent_at=sent_at)
    TokenNotice.objects.create(token=ci, kind="last_day", user=owner, state="failed", attempts=6,
                               error="The mail server refused the message (550).")  # fmt: skip
    TokenNotice.objects.create(token=ci, kind="last_day", user=lead, state="sent", sent_at=sent_at)
    body = login(owner).get(URL).content.decode()
    assert "API tokens expiring" in body
    rows = [row for row in body.split("<tr") if "token-notice-" in row]
    assert len(rows) == 2  # the lead's notice of the same token is theirs alone
    failed, sent = rows  # newest first
    assert f"ci-main</b> <span class=\"muted\">{ci.prefix}…" in failed and "maps" in failed
    assert "Expires within a day" in failed and "failed" in failed and "refused the message (550)" in failed
    assert f"laptop</b> <span class=\"muted\">{laptop.prefix}…" in sent and "your own token" in sent
    assert "Expires within 14 days" in sent and '<span class="badge s-succeeded">sent</span>' in sent
    assert f'title="{timezone.localtime(sent_at):%Y-%m-%d %H:%M}' in sent  # when it went out, on hover


def test_an_outsider_sees_none_of_another_person_s_token_notices(login, owner, outsider, maps):
    token, _ = token_create(name="ci-main", team=maps, actor=owner, days=90)
    TokenNotice.objects.create(token=token, kind="soon", user=owner, state="sent", sent_at=timezone.now())
    body = login(outsider).get(URL).content.decode()
    assert "ci-main" not in body and token.prefix not in body
    assert "None yet — when an API token of yours, or of a team you lead, nears its expiry" in body
