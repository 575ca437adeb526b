"""The pages in a real Chromium: submit, preview, errors, live dashboard, cancel, quota what-if, access."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from tenants.models import AuditEntry, Quota
from tests.browser.conftest import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_submitted_job_shows_queued_with_position_and_reason(log_in, owner, fill, cycle, shot):
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_name", "resnet-big")
    page.fill("#id_image", "tensorflow/tensorflow:2.12.0-gpu")
    page.fill("#id_command", "python /app/train.py")
    page.fill("#id_replicas-0-gpu", "8")
    expect(page.locator("#preview")).to_contain_text("position 1")
    shot(page, "submit-form")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    expect(page.locator(".badge")).to_have_text("Queued")
    cycle()  # the loop ranks it; the polled fragment shows where it stands
    expect(page.locator(".waiting")).to_contain_text("Waiting for quota", timeout=8000)
    expect(page.locator(".wait-figures .tile-value").first).to_have_text("1")
    shot(page, "job-queued")


def test_the_fit_preview_changes_as_gpus_are_edited(log_in, owner, cycle):
    cycle()
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_replicas-0-gpu", "1")
    expect(page.locator("#preview")).to_contain_text("Starts now")
    page.fill("#id_replicas-0-count", "3")
    page.fill("#id_replicas-0-gpu", "8")
    expect(page.locator("#preview")).to_contain_text("Can never run")
    page.click("[data-add-replica]")
    expect(page.locator("[data-replica-rows] tr")).to_have_count(2)
    page.locator("[data-remove-replica]").last.click()
    expect(page.locator("[data-replica-rows] tr")).to_have_count(1)


def test_an_invalid_submission_shows_errors_by_the_fields(log_in, owner, shot):
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_name", "Not_Valid")
    page.fill("#id_replicas-0-count", "0")
    page.click("button[type=submit]")
    expect(page.locator(".error-summary")).to_contain_text("stop this job from being submitted")
    expect(page.locator("#field-name .field-error")).to_contain_text("lowercase letters")
    expect(page.locator("#field-image .field-error")).to_contain_text("required")
    expect(page.locator(".replica-row .field-error")).to_contain_text("greater than or equal to 1")
    assert page.url.endswith("/jobs/new/")
    assert not Job.objects.exists()
    shot(page, "submit-errors")


def test_the_yaml_import_fills_the_form(log_in, owner):
    page = log_in(owner, "/jobs/new/")
    page.click("summary:has-text('Import')")
    page.fill("textarea[name=yaml]", "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: bert, labels: {x: y}}\n"
              "spec:\n  pytorchReplicaSpecs:\n    Worker:\n      replicas: 2\n      template:\n        spec:\n"
              "          containers: [{name: pytorch, image: pytorch/pytorch:2.1.0, resources: {limits: {nvidia.com/gpu: 4}}}]\n")
    page.click("text=Fill the form from YAML")
    expect(page.locator(".notice")).to_contain_text("metadata.labels")
    expect(page.locator("#id_name")).to_have_value("bert")
    expect(page.locator("#id_replicas-0-gpu")).to_have_value("4")


def test_an_imported_tier_the_team_may_not_use_is_marked_not_replaced(log_in, owner):
    page = log_in(owner, "/jobs/new/")
    page.click("summary:has-text('Import')")
    page.fill("textarea[name=yaml]", "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: bert}\n"
              "spec:\n  tfReplicaSpecs:\n    Worker:\n      template:\n        spec:\n"
              "          priorityClassName: high-priority\n"
              "          containers: [{name: tf, image: tensorflow/tensorflow:2.12.0-gpu}]\n")
    page.click("text=Fill the form from YAML")
    expect(page.locator("#tier-field .field-error")).to_contain_text("may not use tier 'high-priority'")
    expect(page.locator("#id_tier")).to_have_value("high-priority")
    expect(page.locator("#id_name")).to_have_value("bert")
    assert not Job.objects.exists()


def test_previews_beyond_the_rate_say_so_above_the_form_and_keep_it(log_in, owner, settings):
    from django.core.cache import caches

    settings.PAGE_RATE = "2/min"
    settings.CACHES = {**settings.CACHES, "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                                       "LOCATION": "browser-page-rate"}}  # fmt: skip
    caches["throttle"].clear()
    page = log_in(owner, "/jobs/new/")  # the preview runs once on load
    for gpus in ("2", "3", "4"):
        page.fill("#id_replicas-0-gpu", gpus)
        page.wait_for_timeout(700)  # past the preview's 400 ms debounce: one preview each
    expect(page.locator("#page-alert")).to_contain_text("Too many submissions and previews", timeout=8000)
    expect(page.locator("#id_replicas-0-gpu")).to_have_value("4")
    expect(page.locator("#job-form")).to_be_visible()
    caches["throttle"].clear()  # the minute is over: the next preview goes through
    page.fill("#id_replicas-0-gpu", "5")
    expect(page.locator("#preview")).to_contain_text("5 GPUs")
    expect(page.locator("#page-alert")).to_be_empty()  # "try again in 25 s" does not stay on the page for good


def test_the_dashboard_updates_when_a_cycle_admits_the_job(log_in, owner, submit, cycle, shot):
    cycle()
    job = submit(name="soon-running", replicas=[{"role": "Worker", "count": 2, "gpu": 2}])
    page = log_in(owner, "/")
    expect(page.locator(f"#queue-row-{job.pk}")).to_be_visible()
    expect(page.locator(".gpus .t0 i")).to_have_count(0)
    cycle()
    expect(page.locator(".gpus .t0 i")).to_have_count(4, timeout=9000)  # maps is the first team: palette 0
    expect(page.locator(f"#queue-row-{job.pk}")).to_have_count(0)
    shot(page, "dashboard")


def test_cancel_from_the_job_page(log_in, owner, submit, shot):
    job = submit(name="to-cancel")
    page = log_in(owner, f"/jobs/{job.pk}/")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("text=Cancel job")
    expect(page.locator(".badge")).to_have_text("Cancelled")
    expect(page.locator(".timeline")).to_contain_text("Cancel requested by owner")
    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED
    shot(page, "job-cancelled")


def test_staff_preview_a_quota_change_before_saving_it(log_in, staff, owner, submit, cycle, vision, shot):
    cycle()
    submit(name="borrower", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # maps borrows 4 of vision's
    cycle()
    submit(name="vision-wants", team=vision, user=staff, replicas=[{"role": "Worker", "count": 3, "gpu": 4}])
    page = log_in(staff, "/teams/vision/quota/")
    page.fill("#id_gpu_nominal", "12")
    page.fill("#id_gpu_borrowing_limit", "0")
    expect(page.locator("#whatif")).to_contain_text("Would be preempted")
    expect(page.locator("#whatif")).to_contain_text("borrower")
    expect(page.locator("#whatif")).to_contain_text("vision-wants")
    assert Quota.objects.get(team=vision, resource="gpu").nominal == 8
    shot(page, "quota-what-if")
    page.click("text=Save quota")
    expect(page.locator(".flash")).to_contain_text("gpu nominal 8 GPUs -> 12 GPUs")
    expect(page.locator(".audit")).to_contain_text("staff")
    assert AuditEntry.objects.get().actor == staff


def test_an_outsider_cannot_open_another_teams_job(log_in, outsider, submit, shot):
    job = submit(name="private")
    page = log_in(outsider, "/jobs/")
    response = page.goto(f"/jobs/{job.pk}/")
    assert response.status == 404
    expect(page.locator("h1")).to_have_text("Nothing here")
    expect(page.locator("body")).not_to_contain_text("private")
    shot(page, "not-found")


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_an_adopted_job_s_owner_shows_in_full_on_the_team_page(page_at, owner, submit, width, shot):
    """An adopted job's owner says where it came from; cut short ("kubectl-create (eng…") the part
    that tells would be hidden from everyone, and a tooltip reaches neither a keyboard nor a touch."""
    job = submit(name="adopted")
    Job.objects.filter(pk=job.pk).update(owner=None, submitted_via="kubectl-create (engineer)")
    page = sign_in(page_at(DESKTOP if width == "desktop" else PHONE), owner, "/teams/maps/")
    cell = page.locator("td.owner", has_text="kubectl-create")
    expect(cell).to_have_text("kubectl-create (engineer)")
    # Nothing of it clipped: the cell is as wide as its text, which wraps rather than overflows.
    assert cell.evaluate("td => td.scrollWidth <= td.clientWidth")
    shot(page, f"team-adopted-owner-{width}")
