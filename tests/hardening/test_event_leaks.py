"""What a team reads never names another team's job: its events, reasons, job pages, queue and dashboard.

The scenario is a reclaim: vision borrows maps' idle GPUs, then maps asks for them back. Everything vision's
people and token can read is searched for maps' job name and id, and the other way round.

The preemption sentences (scheduling/records.py) are read too: a reclaim names the reclaiming team only.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs.models import Job, JobEvent
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tenants.tokens import token_create


@pytest.fixture
def reclaim(submit, outsider, owner, nodes, vision, maps):
    """vision runs two 8-GPU jobs (one on maps' idle nominal); then maps asks for 8 GPUs and reclaims them."""
    cluster = SimulatedCluster()
    borrowers = [submit(team=vision, user=outsider, name=f"vision-run-{i}",
                        replicas=[{"role": "Worker", "count": 1, "gpu": 8}]) for i in (1, 2)]  # fmt: skip
    admission_cycle(cluster=cluster)
    reconcile(cluster=cluster)
    claimer = submit(team=maps, user=owner, name="maps-secret-claim", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    waiter = submit(team=maps, user=owner, name="maps-secret-waiter", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    for _ in range(2):
        admission_cycle(cluster=cluster)
        reconcile(cluster=cluster)
    assert JobEvent.objects.filter(job__team=vision, code="reclaimed").exists()
    return {"vision": borrowers, "maps": [claimer, waiter]}


def secrets_of(jobs: list[Job]) -> list[str]:
    return [text for job in jobs for text in (job.name, f"#{job.pk}", f"job {job.pk}")]


def readable_texts(client, jobs: list[Job]) -> dict[str, str]:
    """Every text the client reads about these jobs and the pages around them."""
    texts = {}
    for job in jobs:
        detail = client.get(f"/api/v1/jobs/{job.pk}/")
        assert detail.status_code == 200
        texts[f"api job {job.pk}"] = detail.json()["reason"]
        events = client.get(f"/api/v1/jobs/{job.pk}/events/?page_size=500").json()["results"]
        for event in events:
            texts[f"api event {event['id']}"] = event["message"]
    texts["api queue"] = str(client.get("/api/v1/queue/").json())
    return texts


def page_texts(client, jobs: list[Job]) -> dict[str, str]:
    texts = {"dashboard": client.get("/").content.decode(), "my jobs": client.get("/jobs/").content.decode()}
    for job in jobs:
        texts[f"page {job.pk}"] = client.get(f"/jobs/{job.pk}/").content.decode()
    return texts


def leaks(texts: dict[str, str], secrets: list[str]) -> list[str]:
    return [f"{where}: {secret!r}" for where, text in texts.items() for secret in secrets if secret in text]


def test_vision_reads_nothing_naming_maps_jobs(reclaim, outsider, vision):
    person = APIClient()
    person.force_login(outsider)
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(name='ci', team=vision)[1]}")
    secrets = secrets_of(reclaim["maps"])
    assert leaks(readable_texts(person, reclaim["vision"]), secrets) == []
    assert leaks(readable_texts(token, reclaim["vision"]), secrets) == []
    assert leaks(page_texts(person, reclaim["vision"]), secrets) == []


def test_maps_reads_nothing_naming_visions_jobs(reclaim, owner):
    person = APIClient()
    person.force_login(owner)
    secrets = secrets_of(reclaim["vision"])
    assert leaks(readable_texts(person, reclaim["maps"]), secrets) == []
    assert leaks(page_texts(person, reclaim["maps"]), secrets) == []
