"""The database refuses what must never happen, whatever code path writes it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import DataError, IntegrityError, transaction

from jobs.models import Job
from tenants.models import PriorityTier, Quota, Team


@pytest.mark.parametrize("slug", ["Maps", "-maps", "maps-", "ma_ps", "m" * 64, ""])
def test_it_refuses_a_team_slug_that_is_not_a_kubernetes_name(db, slug):
    # Too long is a DataError (varchar(63)), the rest the check constraint: both are refusals.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        Team.objects.create(slug=slug, name="x")


def test_validation_names_the_slug_field(db):
    with pytest.raises(ValidationError) as error:
        Team(slug="Bad_Slug", name="x").full_clean()
    assert "slug" in error.value.message_dict


def test_it_refuses_duplicate_team_slugs(maps):
    with pytest.raises(IntegrityError), transaction.atomic():
        Team.objects.create(slug="maps", name="again")


@pytest.mark.parametrize("field", ["nominal", "borrowing_limit", "lending_limit", "max_per_replica"])
def test_it_refuses_negative_quotas(vision, field):
    values = {"nominal": 1, field: -1}
    with pytest.raises(IntegrityError, match=f"quota_{field}"), transaction.atomic():
        Quota.objects.create(team=vision, resource="cpu", **values)


def test_it_refuses_a_second_quota_for_the_same_resource(maps):
    with pytest.raises(IntegrityError), transaction.atomic():
        Quota.objects.create(team=maps, resource="gpu", nominal=1)


def test_it_refuses_an_unknown_resource(maps):
    with pytest.raises(IntegrityError, match="quota_known_resource"), transaction.atomic():
        Quota.objects.create(team=maps, resource="tpu", nominal=1)


def test_it_refuses_a_tier_name_that_is_not_a_kubernetes_name(db):
    with pytest.raises(IntegrityError), transaction.atomic():
        PriorityTier.objects.create(name="High Priority", value=5)


def test_it_refuses_a_duplicate_idempotency_key_within_a_team(submit, maps):
    job = submit()
    Job.objects.filter(pk=job.pk).update(idempotency_key="k1")
    other = submit(name="other")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=other.pk).update(idempotency_key="k1")


def test_the_same_idempotency_key_is_fine_in_another_team(submit, vision, outsider):
    first = submit()
    Job.objects.filter(pk=first.pk).update(idempotency_key="k1")
    second = submit(team=vision, user=outsider)
    Job.objects.filter(pk=second.pk).update(idempotency_key="k1")


def test_it_refuses_negative_gpus_and_unknown_states(submit):
    job = submit()
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(gpu_total=-1)
    with pytest.raises(IntegrityError, match="job_known_state"), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(state="paused")
    with pytest.raises(IntegrityError, match="job_name_dns_label"), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(name="Not A Name")
