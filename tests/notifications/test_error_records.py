"""A delivery's record and the worker's log say what went wrong without repeating what an error's text may carry:
a URL with its token, a server's answer, the recipient's address."""

from __future__ import annotations

import logging
import smtplib

import pytest

from jobs.models import Job
from jobs.transitions import transition
from notifications import emails, sending
from notifications.models import Delivery, TeamWebhook

pytestmark = pytest.mark.django_db
SECRET = "https://hooks.example.com/services/T000/B000/s3cr3t-t0ken"


def fail(job, capture):
    with capture(execute=True):
        for to, message in ((Job.State.ADMITTED, "Admitted."), (Job.State.RUNNING, "Running."),
                            (Job.State.FAILED, "Failed: boom")):  # fmt: skip
            transition(job, to, message=message)


def test_an_unexpected_error_is_recorded_by_its_class_and_its_text_goes_only_to_the_log(
        submit, mailed_owner, retries_held, monkeypatch, caplog, django_capture_on_commit_callbacks):  # fmt: skip
    def broken(digest, attempt):
        raise ValueError(f"could not post to {SECRET}")

    monkeypatch.setattr(sending, "send", broken)
    with caplog.at_level(logging.WARNING, logger="gangway.notifications"):
        fail(submit(), django_capture_on_commit_callbacks)

    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.error) == (
        "retrying", "Sending failed unexpectedly (ValueError); the worker's log has the details.")
    (logged,) = [record for record in caplog.records if record.exc_info]
    assert logged.getMessage() == f"notification {delivery.pk} to email failed unexpectedly"
    assert SECRET in caplog.text  # the operators' details: the traceback
    assert "owner@example.com" not in caplog.text


def test_a_refused_recipient_is_recorded_and_logged_without_their_address(
        submit, mailed_owner, smtp, monkeypatch, caplog, django_capture_on_commit_callbacks):  # fmt: skip
    def refused(*args, **kwargs):
        raise smtplib.SMTPRecipientsRefused({"owner@example.com": (550, b"5.1.1 <owner@example.com>: no such user")})

    monkeypatch.setattr(emails, "send_mail", refused)
    with caplog.at_level(logging.WARNING, logger="gangway.notifications"):
        fail(submit(), django_capture_on_commit_callbacks)

    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.error) == (
        "failed", "The mail server refused the recipient's address (550); check the address on the account.")
    assert f"notification {delivery.pk} to email" in caplog.text
    assert "owner@example.com" not in caplog.text


def test_an_answer_that_is_not_http_is_recorded_by_its_class_not_by_what_the_receiver_said(
        submit, receiver, retries_held, django_capture_on_commit_callbacks):  # fmt: skip
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(b"SSH-2.0-OpenSSH_9.6 key=s3cr3t\r\n")
    fail(job, django_capture_on_commit_callbacks)

    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.error) == ("retrying", "The webhook's answer could not be read (BadStatusLine).")
