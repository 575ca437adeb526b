"""The Kubernetes adapter's log reads over real HTTP against the fake API server, on a busy cluster:
what each read costs the API server, and what a log that prints a lot (long lines, binary garbage,
colours, progress bars, a restarted container) reads as."""

from __future__ import annotations

import pytest

from scheduling.cluster.base import LOG_LINE_BYTES, PICK
from tests.cluster.test_kubernetes_adapter import _replica_pod


def _log_reads(fake) -> list[dict]:
    return [query for method, path, query in fake.requests if path.endswith("/log")]


def _replicas(fake, count: int, state=None, **options) -> None:
    for index in range(count):
        fake.add(_replica_pod(index, state or {"running": {}}, **options))


def test_a_page_of_a_64_replica_job_reads_one_log_not_64(fake, cluster):
    _replicas(fake, 64)
    for index in range(64):
        fake.write_log("maps", f"resnet-g12-worker-{index}", f"replica {index} step 1\n")

    replicas = cluster.logs("maps", 12, tail=30, lines_of=PICK)

    assert len(replicas) == 64 and len(_log_reads(fake)) == 1  # one pod list, one log
    assert replicas[0].lines == ("replica 0 step 1",) and replicas[0].read
    assert replicas[5].lines == () and not replicas[5].read


def test_the_failing_replica_is_the_one_read_and_any_other_can_be_chosen(fake, cluster):
    _replicas(fake, 8)
    fake.add(_replica_pod(5, {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, phase="Failed"))
    fake.write_log("maps", "resnet-g12-worker-5", "Killed\n")
    fake.write_log("maps", "resnet-g12-worker-6", "step 9\n")

    picked = cluster.logs("maps", 12, tail=30, lines_of=PICK)
    chosen = cluster.logs("maps", 12, tail=30, lines_of="worker-6")

    assert [r.replica for r in picked if r.read] == ["worker-5"] and picked[5].lines == ("Killed",)
    assert picked[5].failed  # every replica's state is still there: the page lists them all
    assert [r.replica for r in chosen if r.read] == ["worker-6"] and chosen[6].lines == ("step 9",)


def test_replicas_not_yet_started_cost_no_request(fake, cluster):
    _replicas(fake, 16, {"waiting": {"reason": "ContainerCreating"}}, phase="Pending")
    fake.add({**_replica_pod(16, {}, phase="Pending"), "status": {"phase": "Pending"}})  # not even scheduled

    replicas = cluster.logs("maps", 12)

    assert len(replicas) == 17 and all(r.lines == () for r in replicas)
    assert _log_reads(fake) == []


def test_a_crash_looping_replica_shows_its_previous_containers_lines(fake, cluster):
    fake.add(_replica_pod(0, {"waiting": {"reason": "CrashLoopBackOff"}},
                          last={"exitCode": 1, "reason": "Error"}))  # fmt: skip
    fake.write_log("maps", "resnet-g12-worker-0", "Traceback (most recent call last):\nValueError: bad shard\n",
                   previous=True)  # fmt: skip

    (replica,) = cluster.logs("maps", 12)

    assert replica.lines == ("Traceback (most recent call last):", "ValueError: bad shard")
    assert replica.previous and replica.failed and replica.exit_code == 1
    assert _log_reads(fake)[0]["previous"].lower() == "true"


def test_a_tail_asks_for_a_bounded_number_of_bytes(fake, cluster):
    _replicas(fake, 1)
    fake.write_log("maps", "resnet-g12-worker-0", "".join(f"step {n}\n" for n in range(1000)))

    cluster.logs("maps", 12, tail=30)

    assert int(_log_reads(fake)[0]["limitBytes"]) == 30 * LOG_LINE_BYTES


def test_a_tail_of_long_lines_still_ends_with_the_newest_line(fake, cluster):
    _replicas(fake, 1)
    fake.write_log("maps", "resnet-g12-worker-0", "".join(f"{n:06d} " + "x" * 50_000 + "\n" for n in range(10)))

    (replica,) = cluster.logs("maps", 12, tail=5)

    assert replica.lines and replica.lines[-1].startswith("000009 ")  # not the start of the tail, cut
    assert replica.cut  # the newest line alone is longer than the tail's budget
    assert len(_log_reads(fake)) == 2


@pytest.mark.parametrize(
    ("written", "lines"),
    [
        (b"epoch 1  10%|#    |\r epoch 1  55%|#####|\repoch 1 100%|#########|\ndone\n",
         ("epoch 1 100%|#########|", "done")),
        (b"line one\r\nline two\r\n", ("line one", "line two")),
        (b"\x1b[32mINFO\x1b[0m step 3\n\x1b]0;title\x07ok\n", ("INFO step 3", "ok")),
        (b"garbage \x00\x01\xff\xfe end\n", ("garbage \ufffd\ufffd\ufffd\ufffd end",)),
        ("page\x0cbreak and \u2028 separator\n".encode(), ("page\ufffdbreak and \u2028 separator",)),
    ],
    ids=["a progress bar reads as its last state", "CRLF line ends", "colours and a window title are removed",
         "binary garbage and bytes that are not UTF-8", "a form feed or a line separator ends no line"],
)
def test_what_a_job_prints_reads_as_lines_a_person_can_read(fake, cluster, written, lines):
    _replicas(fake, 1)
    fake.write_log("maps", "resnet-g12-worker-0", written)
    assert cluster.logs("maps", 12)[0].lines == lines


def test_a_progress_bar_counts_as_one_line_of_the_tail(fake, cluster):
    _replicas(fake, 1)
    bar = "".join(f"\r{n}%" for n in range(101))
    fake.write_log("maps", "resnet-g12-worker-0", "".join(f"epoch {n} {bar}\n" for n in range(10)))
    assert cluster.logs("maps", 12, tail=3)[0].lines == ("100%", "100%", "100%")


def test_a_character_cut_by_the_byte_limit_is_left_out_not_garbled(fake, cluster, monkeypatch):
    from scheduling.cluster import kubernetes_logs

    _replicas(fake, 1)
    fake.write_log("maps", "resnet-g12-worker-0", "Größe: äöü\n" * 3)
    monkeypatch.setattr(kubernetes_logs, "LOG_LIMIT_BYTES", 3)  # "Gr" and the first of the two bytes of "ö"
    (replica,) = cluster.logs("maps", 12, tail=None)
    assert replica.lines == ("Gr",) and replica.cut


def test_html_in_a_log_is_kept_as_text_for_the_page_to_escape(fake, cluster):
    _replicas(fake, 1)
    fake.write_log("maps", "resnet-g12-worker-0", "<script>alert(1)</script>\n")
    assert cluster.logs("maps", 12)[0].lines == ("<script>alert(1)</script>",)
