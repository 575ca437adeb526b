"""A sweep in a real Chromium: from its queue row to its page, which follows its trials; an outsider gets 404."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from tests.pages.conftest import katib_sweep

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_row_leads_to_the_sweep_page_which_follows_its_trials(log_in, member, maps, nodes, shot):
    sweep = katib_sweep("tune-lr", trials=4, gpu=4)
    admission_cycle(cluster=SimulatedCluster(failure_rate=0))
    page = log_in(member, "/")
    row = page.locator(f"#sweep-row-{sweep.pk}")
    expect(row).to_contain_text("Sweep tune-lr holds 8 of its 8 GPUs")
    shot(page, "sweep-row")

    row.get_by_role("link", name="tune-lr").click()
    page.wait_for_url(f"**/jobs/sweeps/{sweep.pk}/")
    expect(page.locator("#sweep-waits")).to_contain_text("2 trials, the first of them")
    expect(page.locator("#sweep-trials tbody tr")).to_have_count(4)
    shot(page, "sweep-page")

    Job.objects.filter(sweep=sweep, state=Job.State.ADMITTED).update(state=Job.State.SUCCEEDED)  # two trials end
    expect(page.locator("#sweep-live .tile-value").nth(2)).to_have_text("2", timeout=15_000)  # the poll shows it
    expect(page.locator("#sweep-live .tile-value").nth(3)).to_contain_text("0")


def test_an_outsider_is_told_the_sweep_does_not_exist(log_in, outsider, maps, nodes):
    sweep = katib_sweep("tune-lr", trials=2, gpu=4)

    page = log_in(outsider, "/")
    response = page.goto(f"/jobs/sweeps/{sweep.pk}/")

    assert response.status == 404
    expect(page.locator("body")).not_to_contain_text("tune-lr")
