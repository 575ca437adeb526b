"""Every page at laptop and phone width: it loads, nothing spills sideways, a screenshot is kept."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduling.models import RefusedOutsideJob, UsageSample
from tests.browser.conftest import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAGES = {
    "dashboard": "/",
    "my-jobs": "/jobs/",
    "submit": "/jobs/new/",
    "job": "/jobs/{job}/",
    "teams": "/teams/",
    "team": "/teams/maps/",
    "quota": "/teams/maps/quota/",
    "team-tokens": "/teams/maps/tokens/",
    "my-tokens": "/tokens/",
}


@pytest.fixture
def world(staff, owner, fill, submit, maps, vision):
    """A busy cluster: one running job, one waiting, one borrowing team, and a day of usage samples."""
    waiting = submit(name="waiting-for-room", user=staff, replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.loop import admission_cycle

    admission_cycle(cluster=SimulatedCluster())
    now = timezone.now()
    UsageSample.objects.bulk_create(
        UsageSample(team=maps, at=now - timedelta(minutes=m), gpu_used=(4 if m > 600 else 12 if m > 120 else 16),
                    gpu_borrowed=(0 if m > 600 else 4 if m > 120 else 8), gpu_nominal=8, gpu_waiting=8 if m < 120 else 0)
        for m in range(5, 1440, 5)
    )  # fmt: skip
    # Two jobs from elsewhere Gangway refused, with a long name and a long reason (the team page lists them).
    RefusedOutsideJob.objects.bulk_create([
        RefusedOutsideJob(team=maps, uid="uid-1", kind="TFJob", name="tune-learning-rate-and-warmup-x7k2q",
                          origin="katib experiment tune-learning-rate-and-warmup, trial tune-learning-rate-and-warmup-x7k2q",
                          reason="Team maps may not use tier 'production'; it may use standard, experiment.",
                          refused_at=now - timedelta(minutes=12)),
        RefusedOutsideJob(team=maps, uid="uid-2", kind="PyTorchJob", name="bert-large", origin="kubectl-create (alice)",
                          reason="Refused by Gangway: 4 x 8 GPUs can never fit: no node of the cluster holds more "
                                 "than 8 GPUs, and team maps may hold at most 16 (8 nominal + 8 borrowable).",
                          refused_at=now - timedelta(hours=3)),
    ])  # fmt: skip
    return waiting


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["laptop", "phone"])
def test_every_page_fits_its_width(browser, live_server, staff, world, viewport, shot):
    context = browser.new_context(viewport=viewport, base_url=live_server.url)
    try:
        _visit_every_page(context.new_page(), staff, world, viewport, shot)
    finally:
        context.close()


def _visit_every_page(page, staff, world, viewport, shot):
    page.goto("/login/")
    shot(page, f"login-{viewport['width']}")
    page.fill("#id_username", staff.username)
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    for name, path in PAGES.items():
        response = page.goto(path.format(job=world.pk))
        assert response.status == 200, name
        page.wait_for_load_state("networkidle")
        shot(page, f"{name}-{viewport['width']}")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{name} spills {overflow}px sideways at {viewport['width']}px"
        if name == "team":  # the refused jobs from elsewhere are among what must fit
            expect(page.locator("#refused-h")).to_be_visible()
            expect(page.get_by_text("tune-learning-rate-and-warmup-x7k2q", exact=False).first).to_be_visible()


def test_the_team_chart_s_axis_figures_read_on_a_phone(page_at, staff, world):
    """The 24-hour chart scaled down from its laptop width had axis figures about 4 px high on a phone."""
    page = sign_in(page_at(PHONE), staff, "/teams/maps/")
    chart = page.locator("section[aria-labelledby=chart-h] > svg.chart:visible")
    assert chart.count() == 1  # one chart of the team's GPUs shows, not the wide and the narrow both
    heights = chart.locator("text.axis").evaluate_all("(texts) => texts.map((t) => t.getBoundingClientRect().height)")
    assert heights and min(heights) >= 8, f"axis figures {min(heights):.1f}px high"


def test_the_flash_after_a_submit_sits_beside_the_updated_stamp_never_under_it(log_in, owner, cycle, shot):
    """The stamp floats right; the flash's green box ran on under it, the stamp printed inside the box."""
    cycle()
    page = log_in(owner, "/jobs/new/")
    page.fill("#id_name", "flash-beside-stamp")
    page.fill("#id_image", "busybox:1.36")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    flash, stamp = page.locator(".flash"), page.locator("#live-status")
    expect(flash).to_contain_text("Submitted flash-beside-stamp")
    expect(stamp).to_be_visible()
    expect(page.locator("#offline-banner")).to_be_hidden()  # a banner's own box keeps its `hidden`
    shot(page, "flash-beside-stamp")
    box, other = flash.bounding_box(), stamp.bounding_box()
    apart = (box["x"] + box["width"] <= other["x"] or other["x"] + other["width"] <= box["x"]
             or box["y"] + box["height"] <= other["y"] or other["y"] + other["height"] <= box["y"])  # fmt: skip
    assert apart, f"the flash {box} runs under the stamp {other}"
