"""`gangway logs ID --all` reads on where a download was cut (the portal's time bound, the cluster, a dropped
connection) from the line after the last written, so that one command writes the whole log, each line once;
it stops with 7 only when it cannot go on, saying how many lines it wrote and the command that writes the rest.
Against the live portal with its time bound lowered, and against a scripted one that reads on as the portal does."""

from __future__ import annotations

import hashlib

import pytest

import jobs.api_logs
from scheduling.log_download import log_download
from tests.api.test_jobs_logs_download_read_on import a_day_of_training, bound_downloads
from tests.cli.fake_portal import Answer

LOG = "/api/v1/jobs/7/logs/download/"
STOPPED = "... the download stopped here after 40 s, the longest one download may take; the log goes on"


def digest(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:16]


def reading_on(lines: list[str], *, per: int, header: bool = True):
    """An answer of the scripted portal that reads on as the portal does: `per` lines from `?from=` (after checking
    `last`), then a line saying where the rest is while lines remain."""

    def answer(request) -> Answer:
        start = int(request.query.get("from", 0))
        if start and "last" in request.query:
            assert request.query["last"] == digest(lines[start - 1])  # the client names the last line it wrote
        given = lines[start : start + per]
        body, end = "".join(line + "\n" for line in given), start + len(given)
        if end < len(lines):
            body += (f"{STOPPED} after line {end:,}: the rest at http://portal{LOG}?replica=worker-0&from={end}"
                     f"&last={digest(lines[end - 1])}\n")  # fmt: skip
        headers = {"Content-Type": "text/plain; charset=utf-8", **({"Gangway-Log-From": str(start)} if header else {})}
        return Answer(200, body.encode(), headers)

    return answer


LINES = [f"step {n:05d} loss={n % 97 / 100:.2f}" for n in range(1000)]
# A line the job printed that reads like the portal's note, right before the portal's own: a line of the log.
LINES[299] = f"{STOPPED} after line 299: the rest at http://portal{LOG}?from=299&last={digest(LINES[298])}"


def test_it_reads_on_from_the_line_after_the_last_written_until_the_log_ends(cli, fake_portal):
    fake_portal.on("GET", LOG, reading_on(LINES, per=300))
    result = cli("logs", "7", "--replica", "worker-0", "--all")

    assert result.code == 0 and result.out == "".join(line + "\n" for line in LINES)  # each line once, no note
    asked = [request.query for request in fake_portal.to(LOG)]
    assert asked == [{"replica": "worker-0"}] + [
        {"replica": "worker-0", "from": str(n), "last": digest(LINES[n - 1])} for n in (300, 600, 900)]
    assert result.err.splitlines() == [
        f"gangway: the portal stopped the download at its time bound; reading on after line {n}." for n in
        ("300", "600", "900")]  # fmt: skip


def test_a_connection_dropped_midway_reads_on_from_the_last_whole_line(cli, fake_portal):
    first = "".join(line + "\n" for line in LINES[:500]).encode()
    cut = Answer(200, first, {"Content-Type": "text/plain", "Gangway-Log-From": "0"}, cut_after=len(first) - 10)
    rest = reading_on(LINES, per=1000)
    fake_portal.on("GET", LOG, cut, rest)

    result = cli("logs", "7", "--replica", "worker-0", "--all")

    assert result.code == 0 and result.out == "".join(line + "\n" for line in LINES)  # the cut line written once
    assert fake_portal.to(LOG)[1].query == {"replica": "worker-0", "from": "499", "last": digest(LINES[498])}
    assert "The server stopped sending after " in result.err and "reading on after line 499." in result.err


def test_a_portal_that_cannot_read_on_is_never_let_write_a_line_twice(cli, fake_portal):
    fake_portal.on("GET", LOG, reading_on(LINES, per=300), reading_on(LINES, per=300, header=False))
    result = cli("logs", "7", "--replica", "worker-0", "--all")

    assert result.code == 7 and result.out == "".join(line + "\n" for line in LINES[:300])
    assert "cannot read a download on (it is older than ?from=); 300 lines of the log of job 7 written, each once." \
        in result.err  # fmt: skip


def test_a_log_that_changed_since_its_first_lines_ends_the_command(cli, fake_portal):
    changed = ("... the log changed since its first 300 lines were read: its line 300 is no longer the line received "
               f"there (a container restarted, a pod was replaced or its log rotated); download it again from its "
               f"start: http://portal{LOG}?replica=worker-0&from=0\n")  # fmt: skip
    fake_portal.on("GET", LOG, reading_on(LINES, per=300), Answer(200, changed.encode(), {
        "Content-Type": "text/plain", "Gangway-Log-From": "300"}))  # fmt: skip
    result = cli("logs", "7", "--replica", "worker-0", "--all")

    assert result.code == 7 and result.out == "".join(line + "\n" for line in LINES[:300])  # the note is not the log's
    assert result.err.splitlines()[-1] == (
        "gangway: the log of job 7 changed since its first 300 lines were written (a container restarted, a pod was "
        "replaced or its log rotated): run the command again for the whole of it.")  # fmt: skip


def test_a_download_that_brings_no_line_ends_the_command_saying_how_to_go_on(cli, fake_portal):
    fake_portal.on("GET", LOG, reading_on(LINES, per=300), reading_on(LINES, per=0))
    result = cli("logs", "7", "--replica", "worker-0", "--all")

    assert result.code == 7 and result.out == "".join(line + "\n" for line in LINES[:300])
    assert result.err.splitlines()[-1] == (
        "gangway: the portal stopped the download at its time bound, and no line came in that download; 300 lines "
        "of the log of job 7 written, each once: the rest with `gangway logs 7 --replica worker-0 --all --from "
        "300`.")  # fmt: skip


def test_the_downloads_are_bounded_and_the_rest_is_named(cli, fake_portal, monkeypatch):
    from gangway_cli import whole_log

    monkeypatch.setattr(whole_log, "CONTINUATIONS", 3)
    fake_portal.on("GET", LOG, reading_on(LINES, per=10))
    result = cli("logs", "7", "--all")

    assert result.code == 7 and result.out == "".join(line + "\n" for line in LINES[:40])
    assert len(fake_portal.to(LOG)) == 4 and "the log goes on after 4 downloads" in result.err
    assert result.err.endswith("40 lines of the log of job 7 written, each once: the rest with `gangway logs 7 "
                               "--all --from 40`.\n")  # fmt: skip


def test_from_by_hand_leaves_out_the_lines_already_written(cli, fake_portal):
    fake_portal.on("GET", LOG, reading_on(LINES, per=600))
    result = cli("logs", "7", "--replica", "worker-0", "--all", "--from", "700")

    assert result.code == 0 and result.out == "".join(line + "\n" for line in LINES[700:])
    assert fake_portal.to(LOG)[0].query == {"replica": "worker-0", "from": "700"}  # no digest known: none sent


def test_a_line_that_reads_like_the_portals_note_is_held_until_more_comes_after_it():
    import io

    from gangway_cli.whole_log import Lines

    out = io.BytesIO()
    lines = Lines(out)
    lines.write(b"a\n... the download stopped here, as a job printed it\n")
    assert out.getvalue() == b"a\n" and lines.count == 1
    lines.write(b"b")
    assert out.getvalue() == b"a\n... the download stopped here, as a job printed it\n" and lines.count == 2
    lines.write(b"\n")
    assert lines.count == 3 and lines.last == digest("b") and lines.end() == b""
    lines.write(b"... the log is cut short here: at the end\n")
    assert lines.end() == b"... the log is cut short here: at the end\n" and lines.count == 3  # the answer's last


def test_from_goes_with_all_only(cli, fake_portal):
    result = cli("logs", "7", "--from", "5")
    assert result.code == 2 and "--from goes with --all" in result.err and fake_portal.requests == []


@pytest.fixture
def long_job(submit, cycle, transactional_db):
    """`a_day_of_training`'s job, which the live portal reads."""
    return a_day_of_training(submit, cycle)


def test_the_live_portal_s_cut_downloads_are_read_on_into_the_whole_log(gangway, long_job, monkeypatch):
    bound_downloads(monkeypatch, jobs.api_logs)  # a download carries 4 chunks of 64 KiB
    whole = b"".join(log_download(long_job, replica="worker-0").body).decode()

    result = gangway("logs", str(long_job.pk), "--replica", "worker-0", "--all")

    assert result.returncode == 0, result.stderr
    assert result.stdout == whole  # each line once, in order, without the portal's notes
    said = result.stderr.splitlines()
    assert len(said) >= 2 and all(line.startswith("gangway: the portal stopped the download at its time bound; "
                                                  "reading on after line ") for line in said)  # fmt: skip
