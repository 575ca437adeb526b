"""Who may do what, over the persona table: the rules pages, the API and templates share."""

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Job
from jobs.transitions import transition
from tenants import permissions

pytestmark = pytest.mark.django_db

# persona -> (view maps, submit for maps, cancel the owner's job, manage maps' tokens, edit quotas)
EXPECTED = {
    "owner": (True, True, True, False, False),
    "member": (True, True, False, False, False),
    "lead": (True, True, True, True, False),
    "outsider": (False, False, False, False, False),
    "staff": (True, True, True, True, True),
}


@pytest.fixture
def people(owner, member, lead, outsider, staff):
    return {"owner": owner, "member": member, "lead": lead, "outsider": outsider, "staff": staff}


@pytest.mark.parametrize("persona", list(EXPECTED))
def test_each_persona_may_do_what_its_role_allows(people, persona, maps, submit):
    user, job = people[persona], submit()
    got = (permissions.can_view(user, maps), permissions.can_submit(user, maps), permissions.can_cancel(user, job),
           permissions.can_manage_tokens(user, maps), permissions.can_edit_quota(user))  # fmt: skip
    assert got == EXPECTED[persona]
    assert (maps in permissions.visible_teams(user)) == EXPECTED[persona][0]
    assert (maps in permissions.led_teams(user)) == EXPECTED[persona][3]


def test_a_job_is_offered_for_cancelling_only_while_a_cancel_changes_something(owner, submit):
    job = submit()
    assert job.cancellable and permissions.can_cancel_now(owner, job)
    transition(job, Job.State.CANCELLING, message="test")
    assert not job.cancellable and not permissions.can_cancel_now(owner, job)
    assert permissions.can_cancel(owner, job), "still theirs to cancel: the API answers it without a 403"


def test_only_members_and_staff_are_viewers_of_a_teams_jobs(people, maps):
    viewers = set(get_user_model().objects.filter(permissions.viewers_of(maps.pk)).values_list("username", flat=True))
    assert viewers == {"owner", "member", "lead", "staff"}
