"""The job page's download of a replica's log (/jobs/{id}/logs/{replica}.log) reads on as the API's does: a download
the time bound cut ends with a line giving the address of the rest (`?from=N&last=DIGEST`), which a person opens
in the browser, and the pieces put end to end are the log."""

from __future__ import annotations

import re

import pytest

import jobs.views
from scheduling.log_download import DOWNLOAD_STOPPED, log_download
from tests.api.test_jobs_logs_download_read_on import SECONDS, bound_downloads, long_job  # noqa: F401  (the fixture)

NOTE = re.compile(r"\n(\.\.\. [^\n]*)\n$")


def test_a_cut_download_says_where_the_rest_is_and_the_rest_reads_on(login, owner, long_job, monkeypatch):
    bound_downloads(monkeypatch, jobs.views, "whole_log")
    client = login(owner)
    whole = b"".join(log_download(long_job, replica="worker-0").body).decode()

    pieces, address, name = [], f"/jobs/{long_job.pk}/logs/worker-0.log", f"long-{long_job.pk}-worker-0.log"
    while True:
        response = client.get(address)
        assert response.status_code == 200 and response["Content-Disposition"] == f'attachment; filename="{name}"'
        body = b"".join(response.streaming_content).decode()
        note = NOTE.search(body)
        if note is None:
            pieces.append(body)
            break
        pieces.append(body[: note.start() + 1])
        received = "".join(pieces).splitlines()
        assert note[1].startswith(f"{DOWNLOAD_STOPPED} after {SECONDS} s, the longest one download may take; the "
                                  f"log goes on after line {len(received):,}: the rest at http://testserver/jobs/"
                                  f"{long_job.pk}/logs/worker-0.log?from={len(received)}&last=")  # fmt: skip
        address = note[1].rpartition(" ")[2].removeprefix("http://testserver")
        name = f"long-{long_job.pk}-worker-0-from-{len(received)}.log"  # saved beside the first piece

    assert len(pieces) >= 3 and "".join(pieces) == whole


@pytest.mark.parametrize("start", ["-1", "ten", "", "1" * 20])
def test_a_from_no_download_gives_is_refused_plainly(login, owner, long_job, start):
    response = login(owner).get(f"/jobs/{long_job.pk}/logs/worker-0.log?from={start}")
    assert response.status_code == 400 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode().startswith("from: Lines already received, a whole number from 0 to ")


@pytest.mark.parametrize(("persona", "status"), [("owner", 200), ("member", 200), ("outsider", 404), ("staff", 200)])
def test_reading_on_keeps_the_pages_access_rules(request, login, owner, long_job, persona, status):
    lines = b"".join(log_download(long_job, replica="worker-0").body).decode().splitlines(keepends=True)
    address = f"/jobs/{long_job.pk}/logs/worker-0.log?from=8000"
    assert b"".join(login(owner).get(address).streaming_content).decode() == "".join(lines[8000:])
    assert login(owner).get(address.replace("8000", "ten")).status_code == 400

    response = login(request.getfixturevalue(persona)).get(address)
    assert response.status_code == status
    if status == 200:
        assert b"".join(response.streaming_content).decode() == "".join(lines[8000:])
    else:  # the job first: nothing said of its download, a bad `from` included, to who cannot see it
        assert login(request.getfixturevalue(persona)).get(address.replace("8000", "ten")).status_code == 404
