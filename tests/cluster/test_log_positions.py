"""Reading a log on from a position, over real HTTP against the fake API server: the kubelet's time of each
line (`timestamps=true`) and a read from a time (`sinceTime`), so that a follower gets each line once, however
often its text repeats, and is told of the lines it missed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from scheduling.cluster.base import LogPosition
from scheduling.cluster.log_text import lines_after, position_after, timed_log_lines
from tests.cluster.test_kubernetes_adapter import _replica_pod

POD = "resnet-g12-worker-0"
T0 = datetime(2024, 5, 1, 10, 0, 0, 250_000, tzinfo=timezone.utc)


def _log_reads(fake) -> list[dict]:
    return [query for method, path, query in fake.requests if path.endswith("/log")]


def _write(fake, lines: list[str], *, at: datetime, step=timedelta(milliseconds=1), previous=False) -> None:
    fake.write_log("maps", POD, "".join(line + "\n" for line in lines), at=at, step=step, previous=previous)


def test_the_kubelets_stamps_read_as_utc_times_with_nine_digits():
    data = (b"2024-05-01T10:00:00Z a\n2024-05-01T10:00:00.5Z b\n"
            b"2024-05-01T12:00:00.123456789+02:00 c\n2024-05-01T10:00:01.1Z \xc3")  # fmt: skip
    assert timed_log_lines(data, cut=True) == (
        ("2024-05-01T10:00:00.000000000Z", "a"), ("2024-05-01T10:00:00.500000000Z", "b"),
        ("2024-05-01T10:00:00.123456789Z", "c"), ("2024-05-01T10:00:01.100000000Z", ""),
    )  # fmt: skip


def test_lines_sharing_a_time_are_told_apart_by_their_count():
    timed = [("t1", "x"), ("t1", "x"), ("t1", "x"), ("t2", "y")]
    after, anchored = lines_after(timed, LogPosition("t1", 2))
    assert after == [("t1", "x"), ("t2", "y")] and anchored
    assert position_after(timed[:2]) == LogPosition("t1", 2)
    assert position_after(after, LogPosition("t1", 2)) == LogPosition("t2", 1)
    assert lines_after(timed, LogPosition("t1", 4))[1] is False  # the log no longer holds the position's line


def test_a_timed_read_asks_the_kubelet_for_each_lines_time(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["step 1", "step 2"], at=T0)

    (replica,) = cluster.logs("maps", 12, tail=10, timed=True)

    assert replica.lines == ("step 1", "step 2")
    assert replica.times == ("2024-05-01T10:00:00.250000000Z", "2024-05-01T10:00:00.251000000Z")
    assert replica.position == LogPosition("2024-05-01T10:00:00.251000000Z", 1)
    assert _log_reads(fake)[0]["timestamps"].lower() == "true"


def test_a_log_that_repeats_itself_reads_on_from_its_position(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["A", "B"], at=T0)
    first = cluster.logs("maps", 12, tail=10, timed=True)[0]
    fake.append_log("maps", POD, "A\nB\n", at=T0 + timedelta(seconds=2))  # the same text again, one time for both

    (replica,) = cluster.logs("maps", 12, tail=10, after={"worker-0": first.position})

    assert replica.lines == ("A", "B") and replica.skipped == 0 and replica.skipped_exact
    assert replica.position == LogPosition("2024-05-01T10:00:02.250000000Z", 2)
    read = _log_reads(fake)[-1]
    assert read["sinceTime"] == "2024-05-01T10:00:00Z" and read["timestamps"].lower() == "true"
    assert "tailLines" not in read  # from the position forward, so that nothing between is lost
    (again,) = cluster.logs("maps", 12, tail=10, after={"worker-0": replica.position})
    assert again.lines == () and again.position == replica.position


def test_lines_of_the_same_time_as_the_position_are_given_once(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["loss=0.1", "loss=0.1"], at=T0, step=timedelta(0))
    first = cluster.logs("maps", 12, tail=1, timed=True)[0]  # a tail of one of two lines of the same time
    fake.append_log("maps", POD, "loss=0.1\n", at=T0)  # a third within the same clock tick

    (replica,) = cluster.logs("maps", 12, tail=10, after={"worker-0": LogPosition(first.position.time, 2)})

    assert replica.lines == ("loss=0.1",) and replica.position == LogPosition(first.position.time, 3)


def test_more_lines_than_a_read_returns_are_counted_as_skipped(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["start"], at=T0)
    position = cluster.logs("maps", 12, tail=10, timed=True)[0].position
    fake.append_log("maps", POD, "".join(f"step {n}\n" for n in range(1234 + 10)), at=T0 + timedelta(seconds=3))

    (replica,) = cluster.logs("maps", 12, tail=10, after={"worker-0": position})

    assert replica.skipped == 1234 and replica.skipped_exact
    assert replica.lines == tuple(f"step {n}" for n in range(1234, 1244))


def test_a_replica_not_in_the_positions_reads_from_the_start_of_its_log(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    fake.add(_replica_pod(1, {"running": {}}))
    _write(fake, ["zero"], at=T0)
    fake.write_log("maps", "resnet-g12-worker-1", "one\ntwo\n", at=T0)

    replicas = cluster.logs("maps", 12, tail=10, after={"worker-0": LogPosition("2024-05-01T10:00:00.250000000Z", 1)})

    assert [r.lines for r in replicas] == [(), ("one", "two")]
    assert "sinceTime" not in _log_reads(fake)[-1]


def test_a_restarted_container_gives_its_last_lines_then_the_new_ones(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["step 1", "step 2"], at=T0)
    position = cluster.logs("maps", 12, tail=1, timed=True)[0].position  # after "step 2"
    # It wrote once more, crashed, and its container was started again: times go on.
    fake.add(_replica_pod(0, {"running": {}}, last={"exitCode": 137, "reason": "OOMKilled",
                                                   "finishedAt": "2024-05-01T10:00:05Z"}))  # fmt: skip
    _write(fake, ["step 1", "step 2", "step 3", "Killed"], at=T0, previous=True)
    _write(fake, ["resuming from step 2", "step 3"], at=T0 + timedelta(seconds=10))

    (replica,) = cluster.logs("maps", 12, tail=10, after={"worker-0": position})

    assert replica.lines == ("step 3", "Killed", "resuming from step 2", "step 3")
    assert replica.skipped == 0 and replica.skipped_exact
    assert [q.get("previous", "").lower() for q in _log_reads(fake)[-2:]] == ["true", ""]


def test_a_replaced_pod_says_lines_may_be_missing(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    position = LogPosition("2024-05-01T10:00:00.250000000Z", 1)  # a line of the pod before this one
    _write(fake, ["new pod"], at=T0 + timedelta(seconds=30))

    (replica,) = cluster.logs("maps", 12, tail=10, after={"worker-0": position})

    assert replica.lines == ("new pod",) and replica.skipped == 0 and not replica.skipped_exact


def test_more_than_one_read_counts_is_a_lower_bound(fake, cluster, monkeypatch):
    from scheduling.cluster import kubernetes_logs

    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["start", *(f"step {n:04d}" for n in range(1000))], at=T0)
    position = LogPosition("2024-05-01T10:00:00.250000000Z", 1)  # after "start"
    monkeypatch.setattr(kubernetes_logs, "LOG_LIMIT_BYTES", 4000)  # a forward read counts about a hundred lines

    (replica,) = cluster.logs("maps", 12, tail=5, after={"worker-0": position})

    assert replica.lines == tuple(f"step {n:04d}" for n in range(995, 1000))
    assert 0 < replica.skipped < 995 and not replica.skipped_exact


def test_a_first_tail_of_one_burst_reads_on_without_giving_its_lines_again(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, [f"burst {n}" for n in range(5)], at=T0, step=timedelta(0))  # one write, one time for all
    first = cluster.logs("maps", 12, tail=2, timed=True)[0]
    fake.append_log("maps", POD, "after\n", at=T0 + timedelta(seconds=1))

    (replica,) = cluster.logs("maps", 12, tail=10, after={"worker-0": first.position})

    assert first.lines == ("burst 3", "burst 4")
    assert first.position == LogPosition("2024-05-01T10:00:00.250000000Z", 5)  # every line of its time so far
    assert replica.lines == ("after",) and replica.skipped == 0 and replica.skipped_exact


def test_only_a_tail_all_of_one_time_costs_a_read_to_count_them(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, [f"step {n}" for n in range(5)], at=T0)  # a time of their own each
    assert cluster.logs("maps", 12, tail=2, timed=True)[0].position.count == 1
    _write(fake, ["a", "b"], at=T0, step=timedelta(0))  # one time, but the whole log: nothing before it
    assert cluster.logs("maps", 12, tail=5, timed=True)[0].position.count == 2
    assert len(_log_reads(fake)) == 2  # one read each

    _write(fake, ["a", "b", "c"], at=T0, step=timedelta(0))
    assert cluster.logs("maps", 12, tail=2, timed=True)[0].position.count == 3
    counted = _log_reads(fake)[-1]
    assert counted["sinceTime"] == "2024-05-01T10:00:00Z" and "tailLines" not in counted


def test_newest_lines_of_one_time_after_a_long_gap_are_counted_whole(fake, cluster, monkeypatch):
    from scheduling.cluster import kubernetes_logs

    fake.add(_replica_pod(0, {"running": {}}))
    _write(fake, ["start"], at=T0)
    position = cluster.logs("maps", 12, tail=10, timed=True)[0].position
    fake.append_log("maps", POD, "".join(f"step {n:04d}\n" for n in range(300)), at=T0 + timedelta(seconds=1))
    fake.append_log("maps", POD, "".join(f"last {n}\n" for n in range(8)), at=T0 + timedelta(seconds=2))
    monkeypatch.setattr(kubernetes_logs, "LOG_LIMIT_BYTES", 4000)  # the forward read stops within the steps

    (replica,) = cluster.logs("maps", 12, tail=5, after={"worker-0": position})
    fake.append_log("maps", POD, "next\n", at=T0 + timedelta(seconds=3))
    (again,) = cluster.logs("maps", 12, tail=10, after={"worker-0": replica.position})

    assert replica.lines == tuple(f"last {n}" for n in range(3, 8)) and not replica.skipped_exact
    assert replica.position == LogPosition("2024-05-01T10:00:02.250000000Z", 8)
    assert again.lines == ("next",)
