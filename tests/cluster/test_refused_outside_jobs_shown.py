"""A job from elsewhere that Gangway refused shows on its team's page, for the team's members, while its object
is in the cluster: reconcile keeps `RefusedOutsideJob` as it finds the cluster, over real HTTP to the fake
API server.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from scheduling.loop import admission_cycle
from scheduling.adoption import record_refused
from scheduling.models import RefusedOutsideJob
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import outside_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)
from tenants.models import Team
from tests.conftest import make_user

TFJOBS = "^/apis/kubeflow.org/v1/tfjobs$"
TRIAL = {"labels": {"gangway.io/tier": "production", "katib.kubeflow.org/trial": "tune-lr-x7k2",
                    "katib.kubeflow.org/experiment": "tune-lr"}}  # fmt: skip


@pytest.fixture
def refused_tier(world, tiers):
    """Team maps may use the standard tier only: a job asking for production is refused."""
    world["maps"].tiers.set([tiers["standard"]])


def _delete(fake, name, kind_path=("apis/kubeflow.org/v1", "tfjobs"), namespace="maps"):
    fake.objects.pop((*kind_path, namespace, name))  # kubectl delete, by its owner


def test_a_refused_job_is_kept_with_its_reason_origin_and_when_it_was_first_refused(world, fake, cluster,
                                                                                   refused_tier):  # fmt: skip
    fake.add(outside_job(name="tune-lr-x7k2", gpu=1, **TRIAL))

    reconcile(cluster=cluster)

    [row] = RefusedOutsideJob.objects.all()
    obj = fake.get("TFJob", "tune-lr-x7k2", "maps")
    assert (row.team.slug, row.kind, row.name, row.uid) == ("maps", "TFJob", "tune-lr-x7k2", obj["metadata"]["uid"])
    assert row.reason == obj["metadata"]["annotations"]["gangway.io/rejected"]
    assert "may not use tier 'production'" in row.reason
    assert row.origin == "katib experiment tune-lr, trial tune-lr-x7k2"
    first = row.refused_at

    reconcile(cluster=cluster, now=timezone.now() + timedelta(minutes=5))  # found refused again, as it was

    assert list(RefusedOutsideJob.objects.values_list("refused_at", flat=True)) == [first]
    assert not Job.objects.exists()


def test_a_katib_trial_keeps_the_experiment_it_came_from_read_on_its_trial(world, fake, cluster, refused_tier):
    """Katib labels the Trial, not its job: the experiment is read from the Trial at the refusing pass only."""
    fake.add({"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
              "metadata": {"name": "tune-lr-x7k2", "namespace": "maps",
                           "labels": {"katib.kubeflow.org/experiment": "tune-lr"}}})  # fmt: skip
    owner = [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": "tune-lr-x7k2", "controller": True}]
    fake.add(outside_job(name="tune-lr-x7k2", gpu=1, labels={"gangway.io/tier": "production"},
                         ownerReferences=owner))  # fmt: skip

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert RefusedOutsideJob.objects.get().origin == "katib experiment tune-lr, trial tune-lr-x7k2"


def test_a_long_refusal_is_kept_as_the_object_carries_it(world, fake, cluster, refused_tier):
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    obj["metadata"]["annotations"]["gangway.io/rejected"] = "Refused by Gangway: " + "too long. " * 150
    fake.add(obj)  # a refusal longer than an annotation holds, as written back, cut

    reconcile(cluster=cluster)

    row = RefusedOutsideJob.objects.get()
    assert row.reason == obj["metadata"]["annotations"]["gangway.io/rejected"][:1000]


def test_a_refusal_whose_write_back_failed_is_recorded_all_the_same(world, fake, cluster, refused_tier):
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    fake.fail(403, method="PATCH", path="/tfjobs/bert-kubectl$", times=10)

    reconcile(cluster=cluster)  # the annotation is tried again at the next pass

    assert "gangway.io/rejected" not in (fake.get("TFJob", "bert-kubectl", "maps")["metadata"].get("annotations") or {})
    assert "may not use tier 'production'" in RefusedOutsideJob.objects.get().reason


def test_an_object_refused_in_a_namespace_that_is_no_team_s_is_not_listed(world, fake, cluster):
    """A copy of a refused object in another namespace, its refusal with it: no team to list it under."""
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sandbox"}})
    job = outside_job(namespace="sandbox", labels={"gangway.io/queue": "maps"},
                      annotations={"gangway.io/rejected": "Refused by Gangway: no."})  # fmt: skip
    fake.add(job)

    reconcile(cluster=cluster)

    assert not RefusedOutsideJob.objects.exists() and not Job.objects.exists()


def test_a_pass_that_finds_nothing_changed_writes_nothing(world, fake, cluster, refused_tier,
                                                          django_assert_num_queries):  # fmt: skip
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)
    found = cluster.outside_jobs()
    teams = {team.slug: team for team in Team.objects.all()}

    with django_assert_num_queries(1):  # the rows, read; nothing written
        record_refused(found, {}, teams, {}, timezone.now())


def test_a_refusal_found_on_an_object_is_kept_even_if_gangway_forgot_it(world, fake, cluster, refused_tier):
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)
    RefusedOutsideJob.objects.all().delete()  # e.g. a database restored from before the refusal

    reconcile(cluster=cluster)

    assert RefusedOutsideJob.objects.get().name == "bert-kubectl"


def test_a_refused_job_leaves_the_list_when_its_object_leaves_the_cluster(world, fake, cluster, refused_tier):
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    fake.add(outside_job("PyTorchJob", name="tune", labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)
    assert RefusedOutsideJob.objects.count() == 2
    _delete(fake, "bert-kubectl")

    reconcile(cluster=cluster)

    assert list(RefusedOutsideJob.objects.values_list("name", flat=True)) == ["tune"]


def test_a_kind_whose_list_failed_keeps_its_refused_jobs(world, fake, cluster, refused_tier):
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)
    fake.fail(404, method="GET", path=TFJOBS, times=1, message="the server could not find the requested resource")

    reconcile(cluster=cluster)  # it says nothing of TFJobs

    assert RefusedOutsideJob.objects.get().name == "bert-kubectl"


def test_a_job_created_again_once_fixed_is_adopted_and_leaves_the_list(world, fake, cluster, refused_tier):
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)
    _delete(fake, "bert-kubectl")
    fake.add(outside_job())  # the same name, asking for a tier the team may use: a new object

    reconcile(cluster=cluster)

    assert not RefusedOutsideJob.objects.exists()
    assert Job.objects.get().cluster_name == "bert-kubectl"


def test_an_adopted_job_is_never_listed_as_refused(world, fake, cluster):
    fake.add(outside_job())

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.count() == 1 and not RefusedOutsideJob.objects.exists()


def test_an_adopted_job_a_cycle_rejects_is_a_gangway_job_not_a_refused_one(world, fake, cluster):
    """Its refusal is written on its object too, but it has a Gangway job of its own, whose page says why."""
    fake.add(outside_job(gpu=8, replicas=2))  # no cycle has read the nodes yet: adopted, then the first rejects
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.REJECTED
    assert "gangway.io/rejected" in fake.get("TFJob", "bert-kubectl", "maps")["metadata"]["annotations"]
    assert not RefusedOutsideJob.objects.exists()


def test_the_team_page_lists_them_for_its_members_and_never_names_them_to_an_outsider(world, fake, cluster,
                                                                                     refused_tier, client):  # fmt: skip
    fake.add(outside_job(name="tune-lr-x7k2", gpu=1, **TRIAL))
    reconcile(cluster=cluster)
    member = make_user("member-of-maps", teams=[world["maps"]])
    outsider = make_user("member-of-vision", teams=[world["vision"]])

    client.force_login(member)
    page = client.get("/teams/maps/").content.decode()
    assert "Refused from the cluster" in page and "tune-lr-x7k2" in page
    assert "may not use tier &#x27;production&#x27;" in page
    assert "katib experiment tune-lr, trial tune-lr-x7k2" in page

    client.force_login(outsider)
    page = client.get("/teams/maps/").content.decode()
    assert client.get("/teams/maps/").status_code == 200  # every team's page is open to read, not its jobs
    assert "Refused from the cluster" not in page and "tune-lr-x7k2" not in page
    assert "Refused from the cluster" not in client.get("/teams/vision/").content.decode()  # none of its own


def test_the_team_page_shows_the_latest_twenty(world, client):
    now = timezone.now()
    RefusedOutsideJob.objects.bulk_create(
        RefusedOutsideJob(team=world["maps"], uid=f"uid-{n}", kind="TFJob", name=f"refused-{n:02d}", reason="Refused.",
                          refused_at=now - timedelta(minutes=n))
        for n in range(25))  # fmt: skip
    client.force_login(make_user("member-of-maps", teams=[world["maps"]]))

    page = client.get("/teams/maps/").content.decode()

    assert "the latest 20 of the jobs" in page
    assert "refused-19" in page and "refused-20" not in page  # refused-00 is the latest
