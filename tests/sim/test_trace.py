"""Reading traces: windows, load compression, column mapping, bad rows."""

from __future__ import annotations

import pytest

from scheduling.sim import TraceError, read_teams, read_trace
from scheduling.sim.run import traces_dir
from scheduling.sim.world import pods_of, replicas_of, restart_overhead

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


@pytest.fixture
def files(tmp_path):
    vc = tmp_path / "vc.csv"
    vc.write_text("vc,node num\nalpha,2\nbeta,1\n")
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "\n".join([
        "2017-10-01 00:00:10,100.0,1,100.0,alpha",   # line 2
        "2017-10-01 00:00:05,50.0,8,400.0,beta",     # line 3
        "2017-10-01 00:00:10,60.0,2,120.0,beta",     # line 4: same second as line 2
        "2017-10-01 00:00:20,,1,0,alpha",            # line 5: missing duration
        "2017-10-01 00:00:20,10,1,10,gamma",         # line 6: unknown team
        "2017-10-01 00:00:20,10,-4,10,alpha",        # line 7: negative GPUs
        "2017-10-01 00:00:20,10,32,10,alpha",        # line 8: larger than 24 GPUs
        "2017-09-30 23:59:59,10,1,10,alpha",         # line 9: before the window
        "2017-10-01 00:01:00,10,4,40,alpha",         # line 10
    ]) + "\n\n")
    return str(trace), str(vc)


def test_it_reads_team_sizes_in_gpus(files):
    assert read_teams(files[1]) == (("alpha", 16), ("beta", 8))


def test_it_skips_bad_rows_with_their_line_numbers(files):
    trace, vc = files
    result = read_trace(trace, read_teams(vc), start="2017-10-01 00:00:00")
    assert [b.line for b in result.bad] == [5, 6, 7, 8]
    assert "unknown team 'gamma'" in result.bad[1].reason
    assert "larger than the cluster" in result.bad[3].reason
    assert [(j.line, j.submit) for j in result.jobs] == [(3, 5), (2, 10), (4, 10), (10, 60)]


def test_load_compresses_submit_times_from_the_window_start(files):
    trace, vc = files
    result = read_trace(trace, read_teams(vc), load=4, start="2017-10-01 00:00:00",
                        until="2017-10-01 00:00:30")
    assert [j.submit for j in result.jobs] == [1, 2, 2]  # 5//4, 10//4, 10//4
    assert [j.duration for j in result.jobs] == [50, 100, 60]  # service times unchanged


def test_without_a_window_times_start_at_the_first_submit(files):
    trace, vc = files
    result = read_trace(trace, read_teams(vc))
    assert result.jobs[0].line == 9 and result.jobs[0].submit == 0


def test_columns_map_other_headers(tmp_path, files):
    other = tmp_path / "other.csv"
    other.write_text("when,secs,gpus,vc\n2017-10-01 00:00:00,5,1,alpha\n")
    result = read_trace(str(other), read_teams(files[1]),
                        columns={"timestamp": "when", "duration": "secs",
                                 "num_gpus": "gpus", "cluster": "vc"})
    assert len(result.jobs) == 1 and result.jobs[0].gpus == 1


def test_missing_columns_name_the_fix(tmp_path, files):
    other = tmp_path / "other.csv"
    other.write_text("when,secs\n")
    with pytest.raises(TraceError, match="--columns"):
        read_trace(str(other), read_teams(files[1]))


def test_traces_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GANGWAY_TRACES_DIR", str(tmp_path))
    assert traces_dir() == tmp_path
    monkeypatch.delenv("GANGWAY_TRACES_DIR")
    assert traces_dir().parts[-2:] == ("shared", "traces")


@pytest.mark.parametrize("gpus,pods,overhead", [
    (1, (1,), 7), (4, (4,), 30), (8, (8,), 30), (16, (8, 8), 60), (12, (8, 4), 60),
    (24, (8, 8, 8), 60),
])
def test_gang_shapes_and_restart_overheads(gpus, pods, overhead):
    assert pods_of(gpus) == pods
    assert sum(g.count * g.gpu for g in replicas_of(gpus)) == gpus
    assert restart_overhead(gpus) == overhead
