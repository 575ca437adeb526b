"""Shared fixtures: a small world of tiers and teams, and the personas every view is tested with.

Personas: `owner` (member of maps, owns the job), `member` (another member of
maps), `lead` (lead of maps), `outsider` (member of vision only), `staff`.
"""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches

from jobs import kinds
from portal import triggers
from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import SimNode
from scheduling.policy import native
from tenants.models import GpuType, Membership, PriorityTier, Quota, Team
from tests.workers import forget_own


def pytest_configure(config):
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop beside the ORM


LEFT_TO_THE_INTERPRETED_RUN: list[str] = []


def pytest_collection_modifyitems(config, items):
    """With the compiled policy loaded, the tests that patch the policy's
    functions to watch its insides would watch nothing: they are left to the
    run on the interpreted policy (`make test` runs tests/policy again so)."""
    if not native.LOADED:
        return
    kept = [item for item in items if item.get_closest_marker("interpreted_policy") is None]
    left = [item for item in items if item.get_closest_marker("interpreted_policy") is not None]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
        LEFT_TO_THE_INTERPRETED_RUN.extend(item.nodeid for item in left)


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands the tests it left to the interpreted run to the controller, which prints
    the summary (`pytest_testnodedown`)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["left_to_the_interpreted_run"] = LEFT_TO_THE_INTERPRETED_RUN


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: gathers what each worker left (every worker collects every test)."""
    for nodeid in getattr(node, "workeroutput", {}).get("left_to_the_interpreted_run", ()):
        if nodeid not in LEFT_TO_THE_INTERPRETED_RUN:
            LEFT_TO_THE_INTERPRETED_RUN.append(nodeid)


def pytest_terminal_summary(terminalreporter):
    if LEFT_TO_THE_INTERPRETED_RUN and not hasattr(terminalreporter.config, "workeroutput"):
        terminalreporter.write_line(
            f"{len(LEFT_TO_THE_INTERPRETED_RUN)} tests that watch the policy's insides were left to the "
            "interpreted policy, which `make test` runs second: GANGWAY_POLICY=python pytest tests/policy")


# A job kind Gangway does not ship, registered by tests that check every consumer reads the registry.
MPIJOB = kinds.JobKind(
    name="MPIJob", group="kubeflow.org", version="v1", plural="mpijobs", layout=kinds.Layout.REPLICA_SPECS,
    roles=(kinds.Role("Launcher", singleton=True), kinds.Role("Worker")), container="mpi",
    operator="the Kubeflow MPI Operator", replica_specs="mpiReplicaSpecs",
)  # fmt: skip


@pytest.fixture(scope="session", autouse=True)
def broker_keys_of_this_run():
    """Deletes the broker keys this test process owned once it ends (tasks sent and never run, bindings), so
    runs leave nothing behind in the test Redis (tests/workers.py)."""
    yield
    forget_own()


@pytest.fixture
def mpijob():
    """MPIJob, registered for the test's duration."""
    with kinds.registered(MPIJOB) as kind:
        yield kind


@pytest.fixture
def tiers(db):
    return {
        "production": PriorityTier.objects.create(name="production", value=1000, preemptible=False, grace_period=60),
        "standard": PriorityTier.objects.create(name="standard", value=100, grace_period=30),
        "experiment": PriorityTier.objects.create(name="experiment", value=10, grace_period=10),
    }


def make_team(slug: str, tiers: dict, *, gpu: int, borrowing_limit: int | None = None, lending_limit=None) -> Team:
    team = Team.objects.create(slug=slug, name=slug.title(), default_tier=tiers["standard"])
    team.tiers.set(tiers.values())
    Quota.objects.create(team=team, resource="gpu", nominal=gpu, borrowing_limit=borrowing_limit,
                         lending_limit=lending_limit, max_per_replica=8)  # fmt: skip
    return team


@pytest.fixture
def maps(tiers):
    return make_team("maps", tiers, gpu=8, borrowing_limit=8)


@pytest.fixture
def vision(tiers):
    return make_team("vision", tiers, gpu=8, borrowing_limit=8)


@pytest.fixture
def nodes(db):
    """Two simulated nodes of 8 GPUs."""
    return [SimNode.objects.create(name=f"node-{i:02d}", gpu=8, cpu=64000, memory=512 * 1024**3) for i in (1, 2)]


A100_LABEL = ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB")
L4_LABEL = ("nvidia.com/gpu.product", "NVIDIA-L4")


@pytest.fixture
def gpu_types(nodes, maps, vision):
    """Two GPU types on the two nodes: node-01 holds 8 a100, node-02 8 l4 (l4 is cheaper, so it comes
    first); maps and vision each have 4 of each type, borrowing up to 4 more of each."""
    l4 = GpuType.objects.create(name="l4", value=L4_LABEL[1], order=1, description="24 GB, inference and small runs")
    a100 = GpuType.objects.create(name="a100", value=A100_LABEL[1], order=2, description="80 GB, large training")
    SimNode.objects.filter(name="node-01").update(labels=dict([A100_LABEL]))
    SimNode.objects.filter(name="node-02").update(labels=dict([L4_LABEL]))
    for team in (maps, vision):
        team.quotas.filter(resource="gpu").delete()
        for kind in (l4, a100):
            Quota.objects.create(team=team, resource=kind.resource, nominal=4, borrowing_limit=4, max_per_replica=8)
    return {"l4": l4, "a100": a100}


@pytest.fixture
def maps_on_a100(gpu_types, submit, cycle):
    """maps runs 6 a100 GPUs (4 nominal + 2 borrowed from vision) and nothing of l4."""
    job = submit(name="big", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()


@pytest.fixture
def cycle(nodes):
    """Run one admission cycle on the simulated cluster (it reads the nodes and records reasons)."""

    def _cycle():
        return admission_cycle(cluster=SimulatedCluster())

    return _cycle


@pytest.fixture
def login(client):
    """Log `client` in as a user; returns the client (None logs nobody in)."""

    def _login(user):
        if user is not None:
            client.force_login(user)
        return client

    return _login




@pytest.fixture(autouse=True)
def broker_up():
    """Every test starts with the broker taken as reachable: a test whose broker refused a publish leaves no
    pause on publishing (`portal.triggers.publish`) to the tests after it."""
    triggers._broker_down_until = 0.0
    yield
    triggers._broker_down_until = 0.0


@pytest.fixture
def throttle_cache(settings):
    """API throttle counts in Redis, under this test process's own key prefix (portal/test_settings.py), empty
    at the start and the end of the test."""
    redis = settings.CACHES["throttle"]["LOCATION"]  # the test Redis (portal/test_settings.py)
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "throttle": {"BACKEND": "portal.cache.RedisCache", "LOCATION": redis, "KEY_PREFIX": settings.TEST_CACHE_PREFIX},
        "logs": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "logs"},
    }
    caches["throttle"].clear()
    yield caches["throttle"]
    caches["throttle"].clear()


def make_user(username: str, *, staff: bool = False, teams=(), role=Membership.Role.MEMBER):
    user = get_user_model().objects.create_user(username=username, password="pw", is_staff=staff)
    for team in teams:
        Membership.objects.create(user=user, team=team, role=role)
    return user


@pytest.fixture
def owner(maps):
    return make_user("owner", teams=[maps])


@pytest.fixture
def member(maps):
    return make_user("member", teams=[maps])


@pytest.fixture
def lead(maps):
    return make_user("lead", teams=[maps], role=Membership.Role.LEAD)


@pytest.fixture
def outsider(vision):
    return make_user("outsider", teams=[vision])


@pytest.fixture
def staff(db):
    return make_user("staff", staff=True)


def spec_data(**overrides) -> dict:
    data = {
        "team": "maps", "name": "resnet", "kind": "TFJob", "image": "tensorflow/tensorflow:2.12.0-gpu",
        "command": ["python", "train.py"], "replicas": [{"role": "Worker", "count": 2, "gpu": 1}],
    }  # fmt: skip
    data.update(overrides)
    return data


@pytest.fixture
def submit(maps, owner):
    """Submit a job for maps (or another team) as `owner`; returns the job."""

    def _submit(team=None, user=None, **overrides):
        team = team or maps
        spec = parse_spec(spec_data(team=team.slug, **overrides))
        job, _ = job_submit(team=team, spec=spec, owner=user or owner)
        return job

    return _submit


@pytest.fixture
def teams_holding_a_gpu(tiers, maps, staff, submit, cycle):
    """Many teams, each holding one GPU: `teams_holding_a_gpu(slugs, gpu=2)` makes a team of
    `gpu` nominal GPUs per slug and runs one job of 1 GPU for maps (`maps-one`) and one for each of them
    (`<slug>-one`, submitted by staff). Returns the teams made, in the order of `slugs`. Used by the tests of
    more teams than colours (tests/pages/test_team_marks.py, tests/browser/test_many_teams_in_a_browser.py)."""
    one_gpu = [{"role": "Worker", "count": 1, "gpu": 1}]

    def _teams(slugs: list[str], *, gpu: int) -> list[Team]:
        cycle()
        submit(name="maps-one", replicas=one_gpu)
        teams = [make_team(slug, tiers, gpu=gpu) for slug in slugs]
        for team in teams:
            submit(name=f"{team.slug}-one", team=team, user=staff, replicas=one_gpu)
        cycle()
        return teams

    return _teams
