"""A token's people are told by e-mail, once each, when it enters its last 14 days and again a day before it
expires: which token, when, and how to make a new one; never twice, whichever worker or run sends it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from notifications import emails, outcomes, tasks, token_notices
from notifications.models import TokenNotice
from tenants.models import ApiToken
from tenants.tokens import token_create, token_revoke

pytestmark = pytest.mark.django_db


def expiring(token: ApiToken, *, within: timedelta) -> ApiToken:
    """The token as it stands `within` before its expiry, having lived its whole lifetime so far."""
    lifetime = token.expires_at - token.created_at
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).update(expires_at=now + within, created_at=now + within - lifetime)
    token.refresh_from_db()
    return token


def told(smtp) -> list[tuple[str, str]]:
    """(recipient, message) of each e-mail the sink received."""
    return [(recipients[0], message) for recipients, message in smtp.messages]


@pytest.fixture
def with_address():
    def _with_address(user):
        user.email = f"{user.username}@example.com"
        user.save()
        return user

    return _with_address


def test_a_user_tokens_person_is_told_once_when_it_enters_its_last_14_days(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=13, hours=-1))  # read as 13 days

    tasks.warn_expiring_tokens()
    tasks.warn_expiring_tokens()  # beat's next run

    ((to, message),) = told(smtp)
    assert to == "owner@example.com"
    assert "Subject: [Gangway] Your API token laptop expires in 13 days" in message
    assert f"({token.prefix}...) expires on {token.expires_at:%Y-%m-%d %H:%M} UTC, in 13 days" in message
    assert "Make a new one on your tokens page (https://gangway.example.com/tokens/)" in message
    notice = TokenNotice.objects.get()
    assert (notice.kind, notice.state, notice.attempts, notice.user) == ("soon", "sent", 1, owner)


def test_a_team_tokens_leads_and_its_maker_are_told_not_its_other_members(maps, lead, member, owner, with_address,
                                                                          smtp):  # fmt: skip
    for person in (lead, member, owner):
        with_address(person)
    token, _ = token_create(name="ci-main", team=maps, actor=member, days=90)
    expiring(token, within=timedelta(days=10, hours=1))

    tasks.warn_expiring_tokens()

    assert sorted(to for to, _ in told(smtp)) == ["lead@example.com", "member@example.com"]
    message = told(smtp)[0][1]
    assert "Subject: [Gangway] API token ci-main of team maps expires in 10 days" in message
    assert ("A lead of team maps makes a new one on the team's tokens page "
            "(https://gangway.example.com/teams/maps/tokens/)") in message  # fmt: skip


def test_a_run_stopped_between_two_people_of_a_token_leaves_the_next_run_to_tell_both(maps, lead, member,
                                                                                      with_address, smtp,
                                                                                      monkeypatch):  # fmt: skip
    with_address(lead), with_address(member)
    token, _ = token_create(name="ci-main", team=maps, actor=member, days=90)
    expiring(token, within=timedelta(days=10))
    create = TokenNotice.objects.create
    made = []

    def killed_after_the_first(**fields):
        if made:
            raise SystemExit("the worker is killed")
        made.append(create(**fields))
        return made[-1]

    monkeypatch.setattr(TokenNotice.objects, "create", killed_after_the_first)
    with pytest.raises(SystemExit):
        token_notices.notices_due(timezone.now())
    monkeypatch.undo()

    tasks.warn_expiring_tokens()  # beat's next run

    assert sorted(to for to, _ in told(smtp)) == ["lead@example.com", "member@example.com"]


def test_a_team_token_nobody_in_its_team_can_be_told_of_is_told_to_the_admins(maps, member, staff, with_address,
                                                                               smtp):  # fmt: skip
    with_address(member), with_address(staff)
    token, _ = token_create(name="ci-nightly", team=maps, days=90)  # by an operator's create_token: no maker
    expiring(token, within=timedelta(days=10))  # and maps has no lead

    tasks.warn_expiring_tokens()

    assert [to for to, _ in told(smtp)] == ["staff@example.com"]


def test_a_maker_who_left_the_team_is_not_told(maps, lead, member, with_address, smtp):
    with_address(lead), with_address(member)
    token, _ = token_create(name="ci-main", team=maps, actor=member, days=90)
    member.memberships.all().delete()
    expiring(token, within=timedelta(days=10))

    tasks.warn_expiring_tokens()

    assert [to for to, _ in told(smtp)] == ["lead@example.com"]


def test_a_day_before_it_expires_they_are_told_once_more(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=13))
    tasks.warn_expiring_tokens()
    expiring(token, within=timedelta(hours=20))

    tasks.warn_expiring_tokens()
    tasks.warn_expiring_tokens()

    assert len(told(smtp)) == 2
    assert "Subject: [Gangway] Your API token laptop expires within a day" in told(smtp)[1][1]
    assert sorted(TokenNotice.objects.values_list("kind", "state")) == [("last_day", "sent"), ("soon", "sent")]


def test_a_token_made_for_7_days_is_told_only_of_its_last_day(owner, with_address, smtp):
    token, _ = token_create(name="short", user=with_address(owner), days=7)
    expiring(token, within=timedelta(days=6))
    tasks.warn_expiring_tokens()
    assert told(smtp) == []

    expiring(token, within=timedelta(hours=12))
    tasks.warn_expiring_tokens()
    assert ["within a day" in message for _, message in told(smtp)] == [True]


def test_a_token_first_seen_in_its_last_day_gets_only_the_last_days_notice(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(hours=5))  # beat was stopped for two weeks

    tasks.warn_expiring_tokens()

    assert list(TokenNotice.objects.values_list("kind", flat=True)) == ["last_day"] and len(told(smtp)) == 1


def test_a_notice_another_worker_holds_is_not_sent_again(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=12))
    (notice,) = token_notices.notices_due(timezone.now())
    TokenNotice.objects.filter(pk=notice.pk).update(claimed_at=timezone.now())  # a worker is sending it

    assert tasks.warn_expiring_tokens() == 0
    assert tasks.send_token_notice(notice.pk) == "skipped"
    assert told(smtp) == []


def test_a_notice_sent_is_skipped_by_a_second_task_for_it(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=12))
    (notice,) = token_notices.notices_due(timezone.now())

    assert [tasks.send_token_notice(notice.pk), tasks.send_token_notice(notice.pk)] == ["sent", "skipped"]
    assert token_notices.notices_due(timezone.now()) == [] and len(told(smtp)) == 1


def test_a_notice_the_mail_server_refused_for_a_while_goes_on_the_next_run(owner, with_address, smtp, monkeypatch):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=12))
    send = emails.send

    def down_once(*args, **kwargs):
        monkeypatch.setattr(emails, "send", send)
        raise outcomes.SendFailed("Could not send the e-mail: [Errno 111] Connection refused", retry=True)

    monkeypatch.setattr(emails, "send", down_once)
    tasks.warn_expiring_tokens()
    notice = TokenNotice.objects.get()
    assert (notice.state, notice.attempts, notice.claimed_at) == ("pending", 1, None)
    assert notice.error == "Could not send the e-mail: [Errno 111] Connection refused"

    tasks.warn_expiring_tokens()
    notice.refresh_from_db()
    assert (notice.state, notice.attempts, len(told(smtp))) == ("sent", 2, 1)


def test_a_token_revoked_before_its_notice_went_out_is_not_told_of(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=12))
    (notice,) = token_notices.notices_due(timezone.now())
    token_revoke(token=token, actor=owner)

    assert tasks.warn_expiring_tokens() == 0  # beat's run gives it up: nothing would try it again
    notice.refresh_from_db()
    assert (notice.state, notice.error) == ("failed", token_notices.NOT_SENT)  # the page says so, not "pending"
    assert tasks.send_token_notice(notice.pk) == "skipped" and told(smtp) == []


def test_a_send_that_finds_its_token_revoked_records_it_failed(owner, with_address, smtp):
    token, _ = token_create(name="laptop", user=with_address(owner), days=30)
    expiring(token, within=timedelta(days=12))
    (notice,) = token_notices.notices_due(timezone.now())
    token_revoke(token=token, actor=owner)  # after beat enqueued its send

    assert tasks.send_token_notice(notice.pk) == "failed" and told(smtp) == []


def test_tokens_that_never_expire_or_are_far_from_it_are_not_told_of(owner, with_address, smtp):
    with_address(owner)
    token_create(name="forever", user=owner)
    token_create(name="fresh", user=owner, days=90)

    tasks.warn_expiring_tokens()

    assert told(smtp) == [] and not TokenNotice.objects.exists()


def test_beat_looks_every_hour_on_the_notifications_queue():
    entry = settings.CELERY_BEAT_SCHEDULE["warn-expiring-tokens"]
    assert (entry["task"], entry["schedule"]) == ("notifications.warn_expiring_tokens", 3600.0)
    assert tasks.warn_expiring_tokens.name == "notifications.warn_expiring_tokens"
    assert tasks.send_token_notice.name.startswith("notifications.")  # routed to the notifier (CELERY_TASK_ROUTES)
