"""In a real Chromium: another team's page read-only, polls that answer 304, the offline banner,
keyboard-only submission, and a phone-sized invalid submit whose error summary takes the focus."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job
from scheduling.models import Cycle
from tests.browser.conftest import PHONE, SCREENSHOTS, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_outsider_reads_another_teams_page_read_only(log_in, outsider, fill, submit, cycle, shot):
    waiting = submit(name="maps-waits", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    page = log_in(outsider, "/")
    page.click("#live-teams a[href='/teams/maps/']")  # the dashboard's bar of another team leads to its page
    page.wait_for_url("**/teams/maps/")
    expect(page.locator("h1")).to_contain_text("maps")
    expect(page.locator(".page-head .tag")).to_have_text("read-only")
    jobs = page.locator("#team-jobs")
    expect(jobs).to_contain_text("Waiting and running jobs")
    expect(jobs.locator("tbody tr")).to_have_count(1)  # one tier: 1 job running on 16 GPUs, 1 waiting for 8
    expect(jobs).not_to_contain_text("filler")
    expect(jobs).not_to_contain_text("maps-waits")
    expect(jobs.locator("a[href^='/jobs/']")).to_have_count(0)
    expect(page.locator("a[href='/teams/maps/tokens/']")).to_have_count(0)
    expect(page.locator("a[href^='/jobs/new/']").filter(has_text="Submit a job")).to_have_count(0)
    shot(page, "team-page-outsider")
    assert page.goto(f"/jobs/{waiting.pk}/").status == 404


def test_the_dashboard_polls_each_part_and_gets_304_while_nothing_changes(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/")
    with page.expect_response(lambda r: "part=nodes" in r.url and r.status == 304, timeout=15_000):
        pass
    expect(page.locator("#live-status")).to_contain_text("Updated")
    expect(page.locator("#live-nodes")).to_be_visible()  # a 304 swaps nothing away


def test_a_poll_after_the_session_ended_takes_the_page_to_sign_in_and_back(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/jobs/?state=waiting")
    page.context.clear_cookies()  # signed out in another tab, or the session expired
    page.wait_for_url("**/login/?next=%2Fjobs%2F%3Fstate%3Dwaiting", timeout=15_000)
    expect(page.locator("form input[name='username']")).to_have_count(1)  # one sign-in form: the page's own
    expect(page.locator("header.topbar")).to_have_count(1)


def test_the_offline_banner_shows_when_the_server_stops_answering(log_in, owner, cycle, shot):
    cycle()
    page = log_in(owner, "/")
    expect(page.locator("#offline-banner")).to_be_hidden()
    last_cycle = page.locator("#live-tiles time[data-age]")
    expect(last_cycle).to_have_text(re.compile(r"\d+ s ago"))
    page.route(re.compile(r".*\?part=.*"), lambda route: route.abort())
    expect(page.locator("#offline-banner")).to_be_visible(timeout=15_000)
    expect(page.locator("#offline-banner")).to_contain_text("Cannot reach the server")
    expect(last_cycle).to_contain_text("(last seen)")  # it no longer counts as if it were fresh
    expect(page.locator("#live-status")).to_have_class(re.compile(r"\bstale\b"))
    shot(page, "offline-banner")
    page.unroute(re.compile(r".*\?part=.*"))
    expect(page.locator("#offline-banner")).to_be_hidden(timeout=15_000)
    expect(last_cycle).to_have_text(re.compile(r"\d+ (s|min) ago"))


def test_an_age_the_page_counts_on_reads_as_the_server_wrote_it(log_in, owner, cycle):
    """The script takes over the last cycle's age and rounds as the server does (half up): 150 s is "3 min", never
    "2 min" a second after the page showed "3 min"."""
    cycle()
    Cycle.objects.update(started_at=timezone.now() - timedelta(seconds=150))
    page = log_in(owner, "/")
    last_cycle = page.locator("#live-tiles time[data-age]")
    page.wait_for_timeout(1500)  # the script has counted at least once
    expect(last_cycle).to_have_text("3 min ago")


def test_the_offline_banner_shows_when_the_server_answers_with_an_error(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/")
    page.route(re.compile(r".*\?part=.*"), lambda route: route.fulfill(status=502, body="Bad gateway"))
    expect(page.locator("#offline-banner")).to_contain_text("HTTP 502", timeout=15_000)
    expect(page.locator("#live-tiles")).to_be_visible()  # the figures stay, marked as old


def tab_to(page, selector: str, limit: int = 80) -> None:
    """Press Tab until the element matching `selector` has the focus."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def test_a_job_is_submitted_with_the_keyboard_alone(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/jobs/new/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"  # the focus ring shows
    page.keyboard.press("Enter")
    tab_to(page, "#id_name")
    page.keyboard.type("keyboard-job")
    tab_to(page, "#id_image")
    page.keyboard.type("busybox:1.36")
    tab_to(page, "button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    assert Job.objects.get().name == "keyboard-job"


def test_a_double_click_on_submit_makes_one_job(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_name", "double-click")
    page.fill("#id_image", "busybox:1.36")
    page.dblclick("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    assert list(Job.objects.values_list("name", flat=True)) == ["double-click"]


def test_an_invalid_submit_on_a_phone_focuses_the_summary_in_view(page_at, owner, cycle, shot):
    cycle()
    page = sign_in(page_at(PHONE), owner, "/jobs/new/")
    expect(page.locator("#preview")).to_be_in_viewport()  # the fit preview is in view from the start
    page.fill("#id_name", "Not_Valid")
    page.fill("#id_image", "busybox")
    page.locator("#id_name").scroll_into_view_if_needed()
    expect(page.locator("#preview")).to_be_in_viewport()  # and stays in view while the form scrolls
    page.click("button[type=submit]")
    summary = page.locator(".error-summary").first
    expect(summary).to_be_focused()
    expect(summary).to_be_in_viewport()
    expect(page.locator("#id_name")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_name")).to_have_attribute("aria-describedby", "error-name")
    shot(page, "submit-error-phone")
    page.screenshot(path=str(SCREENSHOTS / "submit-error-phone-viewport.png"))  # what the phone's screen shows
    page.fill("#id_name", "Still_Bad")  # not fixed yet: the error stays
    expect(page.locator("#error-name")).to_have_count(1)
    page.fill("#id_name", "now-valid")  # the field's own error clears as it is fixed
    expect(page.locator("#error-name")).to_have_count(0)
    expect(page.locator("#id_name")).not_to_have_attribute("aria-invalid", "true")


def test_a_fit_error_marks_the_replica_fields(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_name", "too-big")
    page.fill("#id_image", "busybox")
    page.fill("#id_replicas-0-count", "3")
    page.fill("#id_replicas-0-gpu", "8")
    page.click("button[type=submit]")
    expect(page.locator("#replica-errors")).to_contain_text("Can never run")
    expect(page.locator("#id_replicas-0-gpu")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_replicas-0-gpu")).to_have_attribute("aria-describedby", "replica-errors")
    expect(page.locator(".error-summary").first).to_be_focused()
    assert not Job.objects.exists()
