"""The dashboard and a team's page on a cluster with two GPU types, at laptop and phone width:
the groups per type show, and nothing spills sideways."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.browser.conftest import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def typed_world(gpu_types, staff, submit, cycle):
    """maps runs 6 a100 GPUs (2 borrowed from vision) and 2 l4 GPUs; the cycle samples usage."""
    big = submit(name="big-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    Job.objects.filter(pk=big.pk).update(gpu_type=["a100"])
    submit(name="small-l4", replicas=[{"role": "Worker", "count": 2, "gpu": 1}])
    cycle()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["laptop", "phone"])
def test_the_pages_by_type_fit_their_width(page_at, staff, typed_world, viewport, shot):
    page = sign_in(page_at(viewport), staff)
    for name, path, heading in (("dashboard-types", "/", "h3.type-head"), ("team-types", "/teams/maps/", "#team-types")):
        assert page.goto(path).status == 200
        page.wait_for_load_state("networkidle")
        assert page.locator(heading).first.is_visible()
        shot(page, f"{name}-{viewport['width']}")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{name} spills {overflow}px sideways at {viewport['width']}px"
    assert page.locator("svg.chart:visible").count() == 3  # the team's chart (wide, or narrow on a phone) and one per type
