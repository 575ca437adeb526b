"""The job page's logs: each replica's recent lines, the failing replica, a download; and the failed job's texts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import SimJob
from scheduling.reconcile import reconcile

pytestmark = pytest.mark.django_db

SEES = {"owner": 200, "member": 200, "lead": 200, "outsider": 404, "staff": 200}


@pytest.fixture
def failed_job(submit, cycle):
    """A 1-GPU job that ran on the simulated cluster and failed."""
    job = submit(name="probe", replicas=[{"role": "Worker", "count": 1, "gpu": 1}],
                 simulate={"duration": 30, "fail": True})  # fmt: skip
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    SimJob.objects.filter(pk=sim.pk).update(started_at=sim.started_at - timedelta(seconds=60))
    reconcile(cluster=SimulatedCluster())
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    return job


@pytest.fixture
def running_job(submit, cycle):
    job = submit(name="train", replicas=[{"role": "Worker", "count": 2, "gpu": 1}], simulate={"duration": 3600})
    cycle()
    SimJob.objects.filter(job_id=job.pk).update(started_at=SimJob.objects.get(job_id=job.pk).started_at - timedelta(seconds=300))
    return job


def test_a_failed_job_page_says_why_it_failed_not_who_submitted_it(login, owner, failed_job):
    body = login(owner).get(f"/jobs/{failed_job.pk}/").content.decode()
    box = body.split('class="card ended bad"')[1].split("</section>")[0]
    assert "Failed: Replica worker-0 exited with code 1 (Error)" in box and "Submitted by" not in box
    assert "1 GPU over 1 replica " in body and "0 GPUs" not in body
    assert "1 replica placed; it has ended" in body and "not placed yet" not in body
    assert 'hx-get="/jobs/%d/logs/"' % failed_job.pk in body


def test_the_submitted_event_counts_in_words():
    from jobs.services import _count

    assert (_count(1, "GPU"), _count(0, "GPU"), _count(2, "replica")) == ("1 GPU", "0 GPUs", "2 replicas")


def test_the_logs_fragment_shows_the_failing_replica_and_its_traceback(login, owner, failed_job, htmx):
    response = login(owner).get(f"/jobs/{failed_job.pk}/logs/", **htmx)
    body = response.content.decode()
    assert response.status_code == 286  # the job has ended: polling stops
    assert "Replica worker-0 failed</strong> with exit code <span class=\"num\">1</span> (Error)" in body
    assert "its process exited with an error" in body
    assert "Traceback (most recent call last):" in body
    assert f'href="/jobs/{failed_job.pk}/logs/worker-0.log"' in body


def test_the_logs_opened_as_a_page_have_the_portals_layout(login, owner, failed_job):
    response = login(owner).get(f"/jobs/{failed_job.pk}/logs/")
    body = response.content.decode()
    assert response.status_code == 200 and "<title>Logs of " in body and 'class="crumbs"' in body
    assert "Replica worker-0 failed</strong>" in body and f'href="/jobs/{failed_job.pk}/"' in body


def test_a_running_job_shows_the_first_replicas_lines_and_lists_the_others(login, owner, running_job, htmx):
    response = login(owner).get(f"/jobs/{running_job.pk}/logs/", **htmx)
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('class="replica-log"') == 1 and "the last 30 lines of worker-0" in body and "loss=" in body
    assert f'hx-get="/jobs/{running_job.pk}/logs/?replica=worker-1"' in body
    assert "failed" not in body


def test_a_log_shorter_than_the_page_s_tail_is_said_to_be_whole(login, owner, submit, cycle, htmx):
    job = submit(name="fresh", replicas=[{"role": "Worker", "count": 1, "gpu": 1}], simulate={"duration": 3600})
    cycle()  # just started: its log has a line or two, not 30
    body = login(owner).get(f"/jobs/{job.pk}/logs/", **htmx).content.decode()
    assert "every line of worker-0" in body and "the last 30 lines" not in body


def test_a_reader_chooses_the_replica_shown_and_the_poll_keeps_it(login, owner, running_job, htmx):
    body = login(owner).get(f"/jobs/{running_job.pk}/logs/?replica=worker-1", **htmx).content.decode()
    assert "the last 30 lines of worker-1" in body and "<summary><code>worker-1</code>" in body
    assert "<summary><code>worker-0</code>" not in body
    assert '<input type="hidden" name="replica" value="worker-1">' in body  # what the next poll sends
    page = login(owner).get(f"/jobs/{running_job.pk}/").content.decode()
    assert 'hx-include="find input[name=replica]"' in page


def test_a_replica_the_job_lacks_is_said_and_a_name_that_is_no_replica_is_ignored(login, owner, running_job, htmx):
    body = login(owner).get(f"/jobs/{running_job.pk}/logs/?replica=worker-9", **htmx).content.decode()
    assert "This job has no replica worker-9" in body
    odd = login(owner).get(f"/jobs/{running_job.pk}/logs/?replica=%3Cscript%3E", **htmx).content.decode()
    assert "%3Cscript" not in odd and "the last 30 lines of worker-0" in odd


def test_log_text_is_escaped_on_the_page(login, owner, running_job, htmx, monkeypatch):
    from scheduling.cluster.base import ReplicaLog

    def hostile(self, namespace, job_id, **options):
        return [ReplicaLog(replica="worker-0", pod="train-worker-0", phase="Running",
                           lines=('<script>alert("x")</script>', "<img src=x onerror=alert(1)>"))]  # fmt: skip

    monkeypatch.setattr(SimulatedCluster, "logs", hostile)
    body = login(owner).get(f"/jobs/{running_job.pk}/logs/", **htmx).content.decode()
    assert "<script>alert" not in body and "<img src=x" not in body
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body


def test_the_download_is_the_replicas_whole_log(login, owner, running_job):
    response = login(owner).get(f"/jobs/{running_job.pk}/logs/worker-1.log")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert response["Content-Disposition"] == f'attachment; filename="train-{running_job.pk}-worker-1.log"'
    lines = b"".join(response.streaming_content).decode().splitlines()  # streamed as it is read
    assert "replica worker-1 (2 of 2) started" in lines[0] and len(lines) > 30  # more than the page's tail


def test_the_download_of_a_log_longer_than_one_read_holds_is_whole(login, owner, submit, cycle):
    from scheduling.cluster.base import LOG_CHUNK_BYTES, LOG_LIMIT_BYTES

    job = submit(name="long", replicas=[{"role": "Worker", "count": 1, "gpu": 1}], simulate={"duration": 30 * 86400})
    cycle()
    SimJob.objects.filter(job_id=job.pk).update(started_at=SimJob.objects.get(job_id=job.pk).started_at
                                                - timedelta(days=11))  # fmt: skip
    response = login(owner).get(f"/jobs/{job.pk}/logs/worker-0.log")
    sizes, ends = [], b""
    for chunk in response.streaming_content:  # passed on as it is read
        sizes.append(len(chunk))
        ends = (ends + chunk)[-200:]
    assert sum(sizes) > LOG_LIMIT_BYTES and max(sizes) <= LOG_CHUNK_BYTES
    (tail,) = SimulatedCluster().logs("maps", job.pk, replica="worker-0", tail=1)
    assert ends.decode().splitlines()[-1] == tail.lines[-1]  # to the newest line, not the first 8 MiB


def test_a_replica_the_job_does_not_have_is_not_found(login, owner, running_job):
    assert login(owner).get(f"/jobs/{running_job.pk}/logs/worker-7.log").status_code == 404


def test_a_queued_job_reads_no_logs(login, owner, submit):
    job = submit()
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "/logs/" not in body


def test_an_unreachable_cluster_is_said_plainly(login, owner, running_job, monkeypatch):
    from scheduling.cluster.base import ClusterUnavailable

    def unreachable(*args, **kwargs):
        raise ClusterUnavailable("list Pod maps: cannot reach the API server")

    monkeypatch.setattr(SimulatedCluster, "logs", unreachable)
    monkeypatch.setattr(SimulatedCluster, "log_stream", unreachable)
    body = login(owner).get(f"/jobs/{running_job.pk}/logs/").content.decode()
    assert "The logs could not be read from the cluster: list Pod maps: cannot reach the API server" in body
    assert login(owner).get(f"/jobs/{running_job.pk}/logs/worker-0.log").status_code == 503


@pytest.mark.parametrize("persona, status", SEES.items())
def test_access_to_the_logs_fragment(request, login, failed_job, persona, status):
    assert login(request.getfixturevalue(persona)).get(f"/jobs/{failed_job.pk}/logs/").status_code == status


@pytest.mark.parametrize("persona, status", SEES.items())
def test_access_to_the_download(request, login, failed_job, persona, status):
    response = login(request.getfixturevalue(persona)).get(f"/jobs/{failed_job.pk}/logs/worker-0.log")
    assert response.status_code == status


def test_the_logs_require_login(client, failed_job):
    assert client.get(f"/jobs/{failed_job.pk}/logs/").status_code == 302
    assert client.get(f"/jobs/{failed_job.pk}/logs/worker-0.log").status_code == 302
