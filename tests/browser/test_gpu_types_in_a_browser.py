"""In a real Chromium: GPU type choices on the submit form, in order, with the fit preview naming the type."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobs.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_job_asks_for_a100_then_l4_and_the_preview_names_the_type(log_in, owner, gpu_types, cycle):
    cycle()
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_name", "typed-job")
    page.fill("#id_image", "busybox:1.36")
    page.get_by_label("1st choice").select_option("a100")
    page.get_by_label("2nd choice").select_option("l4")
    expect(page.locator("#preview")).to_contain_text("Starts now on a100 GPUs (node-01).")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    assert Job.objects.get().gpu_type == ["a100", "l4"]
    expect(page.locator("dd.gpu-type")).to_contain_text("asked a100, l4 (in that order) — not admitted yet")
