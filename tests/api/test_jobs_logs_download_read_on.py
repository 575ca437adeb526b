"""GET /api/v1/jobs/{id}/logs/download/?from=N&last=DIGEST: a log longer than one download carries, read on from
the line after the last received, over the simulated cluster; the pieces put end to end are the log, byte for
byte. The time bound is lowered to a clock that moves a second per chunk sent, so a download is cut after a few
chunks without waiting for it."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from functools import partial
from urllib.parse import parse_qs, urlsplit

import pytest
from rest_framework.test import APIClient

import jobs.api_logs
from scheduling.cluster.log_text import line_digest
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.log_download import DOWNLOAD_CHANGED, DOWNLOAD_STOPPED, log_download
from scheduling.models import SimJob
from scheduling.reconcile import reconcile
from tests.api.conftest import PERSONAS
from tests.api.test_jobs_logs import READS, failed_job  # noqa: F401  (the fixture)

NOTE = re.compile(rb"\n(\.\.\. [^\n]*)\n$")  # the last line of a download that does not end with the log
SECONDS = 3  # the lowered bound: a download carries 4 chunks of 64 KiB


def download(job, **query) -> str:
    suffix = "&".join(f"{key}={value}" for key, value in query.items())
    return f"/api/v1/jobs/{job.pk}/logs/download/" + (f"?{suffix}" if suffix else "")


def a_day_of_training(submit, cycle):
    """A job of one replica that trained a day on the simulated cluster and ended: a log of 8,600 lines, 800 KB."""
    job = submit(name="long", replicas=[{"role": "Worker", "count": 1, "gpu": 1}], simulate={"duration": 86_400})
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    SimJob.objects.filter(pk=sim.pk).update(started_at=sim.started_at - timedelta(days=2))
    reconcile(cluster=SimulatedCluster())
    job.refresh_from_db()
    return job


@pytest.fixture
def long_job(submit, cycle):
    """`a_day_of_training`'s job."""
    job = a_day_of_training(submit, cycle)
    assert job.state == "succeeded"
    return job


def bound_downloads(monkeypatch, module, name: str = "log_download") -> None:
    """Bounds the downloads of the view whose module reads `scheduling.log_download.log_download` as `name` to
    SECONDS, on a clock that moves a second for each chunk a download sends (as its reader takes it)."""
    now = [0.0]

    def ticking(job, **options):
        found = log_download(job, seconds=SECONDS, clock=lambda: now[0], **options)
        if found.body is None:
            return found
        body = found.body

        def sent():
            try:
                for chunk in body:
                    yield chunk
                    now[0] += 1
            finally:
                body.close()

        return replace(found, body=sent())

    monkeypatch.setattr(module, name, ticking)


@pytest.fixture
def bounded(monkeypatch):
    """The API's downloads bounded (`bound_downloads`); returns a function that reads a streamed answer whole."""
    bound_downloads(monkeypatch, jobs.api_logs)
    return lambda response: b"".join(response.streaming_content)


def test_a_log_the_time_bound_cuts_reads_on_to_the_same_bytes(as_persona, long_job, bounded):
    client = as_persona("maps_token")
    whole = b"".join(log_download(long_job, replica="worker-0").body)
    assert whole.count(b"\n") > 8000

    pieces, starts, address = [], [], download(long_job, replica="worker-0")
    while address:
        response = client.get(address)
        assert response.status_code == 200
        body = bounded(response)
        starts.append(int(response["Gangway-Log-From"]))
        note = NOTE.search(body)
        if note is None:
            pieces.append(body)
            break
        text = note[1].decode()
        assert text.startswith(f"{DOWNLOAD_STOPPED} after {SECONDS} s, the longest one download may take; the log "
                               "goes on after line ")  # fmt: skip
        rest = urlsplit(text.rpartition(": the rest at ")[2])
        query = parse_qs(rest.query)
        piece = body[: note.start() + 1]
        pieces.append(piece)
        received = sum(piece.count(b"\n") for piece in pieces)
        assert query["replica"] == ["worker-0"] and query["from"] == [str(received)]  # where it stopped, exactly
        assert query["last"] == [line_digest(piece.decode().splitlines()[-1])]
        assert rest.scheme == "http" and rest.path == f"/api/v1/jobs/{long_job.pk}/logs/download/"
        address = f"{rest.path}?{rest.query}"

    assert len(pieces) >= 3  # cut and read on more than once
    assert starts[0] == 0 and starts[1:] == [sum(p.count(b"\n") for p in pieces[:n]) for n in range(1, len(pieces))]
    assert b"".join(pieces) == whole  # each line once, in order, byte for byte


def test_from_leaves_out_the_lines_already_received(as_persona, long_job):
    client = as_persona("owner")
    lines = b"".join(log_download(long_job, replica="worker-0").body).decode().splitlines(keepends=True)
    response = client.get(download(long_job, replica="worker-0", **{"from": 8000}))
    assert response.status_code == 200 and response["Gangway-Log-From"] == "8000"
    assert b"".join(response.streaming_content).decode() == "".join(lines[8000:])
    checked = client.get(download(long_job, **{"from": 3, "last": line_digest(lines[2].rstrip("\n"))}))
    assert b"".join(checked.streaming_content).decode() == "".join(lines[3:])  # the job's one replica, named or not


def test_a_last_line_that_is_no_longer_there_says_the_log_changed(as_persona, long_job):
    client = as_persona("owner")
    lines = b"".join(log_download(long_job, replica="worker-0").body).decode().splitlines()

    moved = client.get(download(long_job, replica="worker-0", **{"from": 100, "last": line_digest(lines[100])}))
    (said,) = b"".join(moved.streaming_content).decode().splitlines()
    assert said.startswith(f"{DOWNLOAD_CHANGED} since its first 100 lines were read: its line 100 is no longer")
    assert said.endswith(f"download it again from its start: http://testserver/api/v1/jobs/{long_job.pk}/logs/"
                         "download/?replica=worker-0&from=0")  # fmt: skip

    beyond = client.get(download(long_job, replica="worker-0", **{"from": 10**6, "last": line_digest(lines[-1])}))
    (said,) = b"".join(beyond.streaming_content).decode().splitlines()
    assert f"it has {len(lines):,} lines now, fewer than the 1,000,000 received" in said


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "-1"}, "from"), ({"from": "ten"}, "from"), ({"from": "1.5"}, "from"), ({"from": ""}, "from"),
        ({"from": "1e3"}, "from"), ({"from": "1000000000001"}, "from"), ({"from": "9" * 5000}, "from"),
        ({"from": "%D9%A3"}, "from"), ({"from": "+5"}, "from"),
        ({"from": "5", "last": "XYZ"}, "last"), ({"from": "5", "last": "0F3A9C1D2B4E5F60"}, "last"),
        ({"from": "5", "last": "0f3a9c1d2b4e5f6"}, "last"), ({"last": "0f3a9c1d2b4e5f60a"}, "last"),
    ],
    ids=["negative", "a word", "a fraction", "empty", "an exponent", "beyond the most", "five thousand digits",
         "a digit other than ASCII", "a sign", "a last that is no digest", "a last in capitals",
         "a last too short", "a last too long"],
)  # fmt: skip
def test_a_from_or_last_no_download_gives_is_refused_naming_it(as_persona, failed_job, query, field):
    response = as_persona("maps_token").get(download(failed_job, replica="worker-0", **query))
    assert response.status_code == 400 and list(response.json()) == [field]
    assert isinstance(response.json()[field][0], str) and response.json()[field][0].endswith(".")


@pytest.mark.parametrize("persona", PERSONAS)
def test_reading_on_keeps_the_jobs_access_rules(as_persona, failed_job, persona):
    asked = download(failed_job, replica="worker-0", **{"from": 1})
    read = as_persona("owner").get(asked)
    rest = b"".join(read.streaming_content).decode()
    assert read["Gangway-Log-From"] == "1" and "(1 of 2) started" not in rest  # the first line left out

    response = as_persona(persona).get(asked)
    assert response.status_code == READS[persona]
    if response.status_code == 200:
        assert response["Gangway-Log-From"] == "1" and b"".join(response.streaming_content).decode() == rest
    else:
        assert "replica worker-0" not in response.content.decode()


def test_an_outsider_asking_with_a_bad_from_learns_nothing_of_the_job(as_persona, failed_job):
    asked = download(failed_job, replica="worker-0", **{"from": "ten"})
    assert as_persona("owner").get(asked).status_code == 400
    for persona in ("outsider", "vision_token"):
        assert as_persona(persona).get(asked).status_code == 404  # the job first, as everywhere


def test_the_schema_documents_reading_on(db):
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/api/v1/jobs/{id}/logs/download/"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["from"]["schema"] == {"type": "integer", "minimum": 0, "maximum": 10**12}
    assert parameters["last"]["schema"] == {"type": "string", "pattern": "^[0-9a-f]{16}$"}
    assert "Gangway-Log-From" in operation["description"] and "from=N&last=DIGEST" in operation["description"]


def test_a_download_cut_before_its_first_line_reads_on_from_the_start(as_persona, long_job, monkeypatch):
    """The bound on the wall clock: at 0 s, the check before the first chunk stops the download."""
    monkeypatch.setattr(jobs.api_logs, "log_download", partial(log_download, seconds=0))
    body = b"".join(as_persona("owner").get(download(long_job)).streaming_content).decode()
    (said,) = body.splitlines()
    assert said.startswith(f"{DOWNLOAD_STOPPED} after 0 s") and "the log goes on from its start" in said
    assert said.endswith("?replica=worker-0&from=0")
