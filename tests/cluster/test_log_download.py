"""A replica's whole log streamed over real HTTP from the fake API server (the port's `log_stream`) and passed on as
a download (`scheduling.log_download.log_download`): a log of any length read and sent a bounded chunk at a time, never
held whole, its lines read as a person reads them, and its end said when the time bound or the cluster cut it;
the simulated cluster's logs the same way through the port."""

from __future__ import annotations

import hashlib
import tracemalloc
from datetime import timedelta

import pytest

from jobs.models import Job
from scheduling.cluster.base import LOG_CHUNK_BYTES, LOG_LIMIT_BYTES
from scheduling.cluster.log_text import StreamedLines, log_lines
from scheduling.log_download import DOWNLOAD_STOPPED, log_download
from tests.cluster.test_kubernetes_adapter import _replica_pod

MIB = 1024**2
LINE = 1013  # bytes of each line of a big log, its "\n" included


def _log_reads(fake) -> list[dict]:
    return [query for method, path, query in fake.requests if path.endswith("/log")]


def _big_log(fake, pod: str, size: int) -> tuple[bytes, int]:
    """Writes a log of about `size` bytes of LINE-byte lines into the pod; returns its sha256 and its length."""
    data = b"".join(b"step %06d " % n + b"x" * (LINE - 13) + b"\n" for n in range(size // LINE))
    fake.write_log("maps", pod, data)
    return hashlib.sha256(data).digest(), len(data)


def _traced(read):
    """`read()`'s result and the most memory Python held at once while it ran (every thread: the fake's too)."""
    tracemalloc.start()
    try:
        result = read()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def running(submit, fake):
    """A job of maps running one replica on the fake API server."""
    job = submit(name="resnet", replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=job.submitted_at, started_at=job.submitted_at)
    fake.add(_replica_pod(0, {"running": {}}, job_id=job.pk))
    job.refresh_from_db()
    return job


def test_a_20_mib_log_streams_whole_in_chunks_of_bounded_size(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    digest, size = _big_log(fake, "resnet-g12-worker-0", 20 * MIB)

    def read():
        stream = cluster.log_stream("maps", 12, replica="worker-0")
        sizes, whole = [], hashlib.sha256()
        for chunk in stream.chunks:
            sizes.append(len(chunk))
            whole.update(chunk)
        return stream.replica, sizes, whole.digest()

    (replica, sizes, read_digest), peak = _traced(read)

    assert replica.replica == "worker-0" and replica.lines == ()
    assert read_digest == digest and sum(sizes) == size
    assert max(sizes) <= LOG_CHUNK_BYTES and len(sizes) >= size // LOG_CHUNK_BYTES
    assert peak < 2 * MIB  # a tenth of the log: it was never held whole, by the reader or by the server
    (asked,) = _log_reads(fake)
    assert "limitBytes" not in asked and "tailLines" not in asked  # the whole log, not its first 8 MiB


def test_the_download_passes_a_20_mib_log_on_a_chunk_at_a_time(running, fake, cluster):
    digest, size = _big_log(fake, f"resnet-g{running.pk}-worker-0", 20 * MIB)

    def read():
        found = log_download(running, replica="worker-0", cluster=cluster)
        sizes, whole = [], hashlib.sha256()
        for chunk in found.body:
            sizes.append(len(chunk))
            whole.update(chunk)
        return sizes, whole.digest()

    (sizes, body_digest), peak = _traced(read)

    assert body_digest == digest and sum(sizes) == size  # plain lines read as they were written
    assert max(sizes) <= LOG_CHUNK_BYTES + LINE  # a chunk's lines, and the one it finished
    assert peak < 3 * MIB


def test_a_download_without_a_replica_named_is_of_the_only_one(running, fake, cluster):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", "only\n")
    found = log_download(running, cluster=cluster)
    assert found.replica.replica == "worker-0" and b"".join(found.body) == b"only\n"


def test_a_download_without_a_replica_named_of_a_job_of_several_names_them(running, fake, cluster):
    fake.add(_replica_pod(1, {"running": {}}, job_id=running.pk))
    found = log_download(running, cluster=cluster)
    assert found.body is None and found.replicas == ("worker-0", "worker-1")
    assert _log_reads(fake) == []  # their states alone: no log was read


@pytest.mark.parametrize(
    ("written", "read"),
    [
        (b"epoch 1  10%|#  |\repoch 1 100%|###|\ndone\n", b"epoch 1 100%|###|\ndone\n"),
        (b"\x1b[32mINFO\x1b[0m step 3\r\n\x1b]0;title\x07ok", b"INFO step 3\nok\n"),
        (b"garbage \x00\xff end\n", "garbage \ufffd\ufffd end\n".encode()),
    ],
    ids=["a progress bar reads as its last state", "colours, a window title and a last line without its end",
         "binary garbage and bytes that are not UTF-8"],
)
def test_a_download_reads_as_the_page_reads(running, fake, cluster, written, read):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", written)
    assert b"".join(log_download(running, replica="worker-0", cluster=cluster).body) == read


def test_a_download_longer_than_its_time_says_where_it_stopped(running, fake, cluster):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", "".join(f"step {n:06d}\n" for n in range(100_000)))
    ticks = iter(range(1_000))  # each look at the clock a second later: the bound passes after 5 chunks

    found = log_download(running, replica="worker-0", seconds=5, clock=lambda: next(ticks), cluster=cluster)
    chunks = list(found.body)
    *lines, last = b"".join(chunks).decode().splitlines()

    assert len(chunks) == 5 + 1  # the five chunks read within the bound, then the line that says so
    assert last.startswith(f"{DOWNLOAD_STOPPED} after 5 s") and "the log goes on" in last
    assert 0 < len(lines) < 100_000
    assert lines[:-1] == [f"step {n:06d}" for n in range(len(lines) - 1)]  # the start of the log, in order
    assert f"step {len(lines) - 1:06d}".startswith(lines[-1])  # and the line the bound cut, as far as it came


def test_a_log_the_cluster_stopped_sending_ends_with_a_line_saying_so(running, fake, cluster):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", "".join(f"step {n:06d}\n" for n in range(100_000)))
    fake.cut_log(after=300_000)

    *lines, last = b"".join(log_download(running, replica="worker-0", cluster=cluster).body).decode().splitlines()

    assert last.startswith("... the log is cut short here: read the log of maps/resnet-g")
    assert "the API server stopped sending it after " in last
    assert lines[0] == "step 000000" and len(lines) < 100_000


def test_a_replica_not_yet_started_has_no_bytes_and_costs_no_log_read(fake, cluster):
    fake.add(_replica_pod(0, {"waiting": {"reason": "ContainerCreating"}}, phase="Pending"))
    stream = cluster.log_stream("maps", 12, replica="worker-0")
    assert list(stream.chunks) == [] and _log_reads(fake) == []
    assert cluster.log_stream("maps", 12, replica="worker-7") is None


def test_a_crash_looping_replica_streams_its_previous_containers_log(fake, cluster):
    fake.add(_replica_pod(0, {"waiting": {"reason": "CrashLoopBackOff"}}, last={"exitCode": 1, "reason": "Error"}))
    fake.write_log("maps", "resnet-g12-worker-0", "ValueError: bad shard\n", previous=True)

    stream = cluster.log_stream("maps", 12, replica="worker-0")

    assert b"".join(stream.chunks) == b"ValueError: bad shard\n" and stream.replica.previous
    assert _log_reads(fake)[-1]["previous"].lower() == "true"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096])
def test_a_log_read_in_chunks_reads_as_it_does_whole(size):
    data = ("Größe \x1b[1mfett\x1b[0m\r\nbar 10%\rbar 100%\n\x00\xff".encode("utf-8", "surrogateescape")
            + "€ end\r\r\nno end".encode()) * 3  # fmt: skip
    lines = StreamedLines()
    text = "".join(lines.feed(data[at : at + size]) for at in range(0, len(data), size)) + lines.end()
    assert text == "".join(line + "\n" for line in log_lines(data))


def test_an_endless_line_is_never_held_whole():
    lines = StreamedLines(hold=4096)
    bar = "".join(f"\r{n}%" for n in range(100_000)).encode()  # a progress bar that never ends its line
    out = "".join(lines.feed(bar[at : at + 1000]) for at in range(0, len(bar), 1000))
    assert out == "" and len(lines.open) < 20  # only what a terminal would show is held
    assert lines.end() == "99999%\n"

    long = StreamedLines(hold=4096)
    parts = [long.feed(b"x" * 1000) for _ in range(100)]
    assert all(len(long.open) <= 5096 for _ in parts) and "".join(parts) + long.end() == "x" * 100_000 + "\n"


@pytest.fixture
def long_simulated_job(submit, cycle):
    """A job of the simulated cluster that has written more than LOG_LIMIT_BYTES: eleven days of training."""
    from scheduling.models import SimJob

    job = submit(name="long", replicas=[{"role": "Worker", "count": 1, "gpu": 1}],
                 simulate={"duration": 30 * 86400})  # fmt: skip
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    SimJob.objects.filter(pk=sim.pk).update(started_at=sim.started_at - timedelta(days=11))
    job.refresh_from_db()
    return job


def test_the_simulated_clusters_log_streams_whole_through_the_port(long_simulated_job):
    from scheduling.cluster.simulated import SimulatedCluster

    cluster = SimulatedCluster()
    stream = cluster.log_stream("maps", long_simulated_job.pk, replica="worker-0")
    sizes, first, last = [], b"", b""
    for chunk in stream.chunks:
        sizes.append(len(chunk))
        first, last = first or chunk, chunk

    assert sum(sizes) > LOG_LIMIT_BYTES and max(sizes) <= LOG_CHUNK_BYTES  # the whole of it, a chunk at a time
    (tail,) = cluster.logs("maps", long_simulated_job.pk, replica="worker-0", tail=1)
    assert "replica worker-0 (1 of 1) started" in first.decode().splitlines()[0]
    assert last.decode().splitlines()[-1] == tail.lines[-1]
    assert cluster.log_stream("maps", long_simulated_job.pk, replica="worker-3") is None
