"""A download read on from a line (`scheduling.log_download.log_download` with `start` and `last`), over real HTTP from
the fake API server: the lines before it counted at "\\n" and left out, each cut falling between two lines and saying
where the rest is, so that the pieces put end to end are the download of the whole log, byte for byte; and the
counting and digests of `scheduling.cluster.log_text` that make it exact, whatever the chunks."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import pytest

from scheduling.cluster.log_text import LINE_HOLD, SkippedLines, StreamedLines, line_digest, log_lines
from scheduling.log_download import DOWNLOAD_CHANGED, DOWNLOAD_CUT_SHORT, DOWNLOAD_STOPPED, log_download
from tests.cluster.test_log_download import running  # noqa: F401  (the fixture)

NOTE = re.compile(rb"(?:^|\n)(\.\.\. [^\n]*)\n$")
# A log a person would not want to lose a byte of: progress bars, colours, a window title, bytes that are not
# UTF-8 (one split by a line's end), control characters, lines of every length, an empty line, and no "\n" at
# the end.
TRICKY = b"".join(
    b"epoch %d  10%%|#  |\repoch %d 100%%|###|\n" % (n, n) if n % 7 == 0
    else b"\x1b[32mINFO\x1b[0m step %06d \x1b]0;title\x07" % n + b"y" * (n % 300) + b"\n" if n % 5 == 0
    else b"garbage \x00\xff\xe2\x82\n" if n % 11 == 0
    else b"\n" if n % 13 == 0
    else "step %06d Größe € ".encode() % n + b"x" * (n * 37 % 900) + b"\n"
    for n in range(4000)
) + b"no end"  # fmt: skip


def _pieces(job, cluster, *, seconds: float, start: int = 0, last: str = "") -> tuple[list[bytes], list[str]]:
    """Reads the replica's log from line `start` on as a reader of downloads does, each download bounded to
    `seconds` on a clock that moves a second for each chunk it sends; returns the pieces of the log (each
    download less its last line, when that says where the rest is) and those last lines."""
    pieces, notes, now = [], [], [0.0]
    while True:
        body = b""
        for chunk in log_download(job, replica="worker-0", start=start, last=last, seconds=seconds,
                                  clock=lambda: now[0], cluster=cluster).body:  # fmt: skip
            body += chunk
            now[0] += 1
        note = NOTE.search(body)
        if note is None or not note[1].startswith((DOWNLOAD_STOPPED.encode(), DOWNLOAD_CUT_SHORT.encode())):
            return pieces + [body], notes
        pieces.append(body[: note.start(1)])
        notes.append(note[1].decode())
        query = parse_qs(notes[-1].rpartition("?")[2])
        start, last = int(query["from"][0]), query.get("last", [""])[0]


def test_a_log_read_on_from_each_cut_is_the_whole_download_byte_for_byte(running, fake, cluster):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", TRICKY)
    whole = b"".join(log_download(running, replica="worker-0", cluster=cluster).body)

    pieces, notes = _pieces(running, cluster, seconds=2)

    assert len(pieces) >= 4 and b"".join(pieces) == whole
    for number, (piece, note) in enumerate(zip(pieces, notes), start=1):
        assert piece.endswith(b"\n")  # a cut falls between two lines
        received = b"".join(pieces[:number]).decode().splitlines()
        assert note.startswith(f"{DOWNLOAD_STOPPED} after 2 s, the longest one download may take; the log goes on "
                               f"after line {len(received):,}: the rest at ?replica=worker-0&from=")  # fmt: skip
        assert note.endswith(f"from={len(received)}&last={line_digest(received[-1])}")


def test_the_lines_before_from_are_left_out_and_the_last_of_them_checked(running, fake, cluster):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", TRICKY)
    lines = b"".join(log_download(running, replica="worker-0", cluster=cluster).body).splitlines(keepends=True)

    for start in (1, 2, 999, 3999, len(lines)):
        last = line_digest(lines[start - 1].decode().rstrip("\n"))
        body = b"".join(log_download(running, replica="worker-0", start=start, last=last, cluster=cluster).body)
        assert body == b"".join(lines[start:])

    (said,) = b"".join(log_download(running, replica="worker-0", start=10, last=line_digest("not that line"),
                                    cluster=cluster).body).decode().splitlines()  # fmt: skip
    assert said.startswith(f"{DOWNLOAD_CHANGED} since its first 10 lines were read: its line 10 is no longer")
    assert said.endswith("download it again from its start: ?replica=worker-0&from=0")


def test_a_log_replaced_since_its_first_lines_says_so_rather_than_read_on(running, fake, cluster):
    pod = f"resnet-g{running.pk}-worker-0"
    fake.write_log("maps", pod, "".join(f"first run {n}\n" for n in range(100)))
    pieces, _ = _pieces(running, cluster, seconds=1e9)
    received = pieces[0].decode().splitlines()
    fake.write_log("maps", pod, "".join(f"second run {n}\n" for n in range(300)))  # a container restarted

    body = b"".join(log_download(running, replica="worker-0", start=100, last=line_digest(received[-1]),
                                 cluster=cluster).body).decode()  # fmt: skip
    assert body.startswith(DOWNLOAD_CHANGED) and body.count("\n") == 1
    fewer = b"".join(log_download(running, replica="worker-0", start=500, cluster=cluster).body).decode()
    assert "it has 300 lines now, fewer than the 500 received" in fewer


def test_a_line_longer_than_the_hold_is_passed_on_whole_before_a_cut(running, fake, cluster):
    long = b"z" * (3 * LINE_HOLD)
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", b"first\n" + long + b"\n" + b"after\n" * 200_000)
    whole = b"".join(log_download(running, replica="worker-0", cluster=cluster).body)

    pieces, notes = _pieces(running, cluster, seconds=1)

    assert pieces[0].startswith(b"first\n" + long + b"\n")  # the bound passed within the long line
    lines = pieces[0].count(b"\n")
    assert f"after line {lines:,}" in notes[0] and b"".join(pieces) == whole


def test_a_log_the_cluster_stopped_sending_reads_on_from_its_last_whole_line(running, fake, cluster):
    fake.write_log("maps", f"resnet-g{running.pk}-worker-0", "".join(f"step {n:06d}\n" for n in range(100_000)))
    whole = b"".join(log_download(running, replica="worker-0", cluster=cluster).body)
    fake.cut_log(after=300_000 + 5)  # within a line

    pieces, notes = _pieces(running, cluster, seconds=1e9)

    assert notes[0].startswith(f"{DOWNLOAD_CUT_SHORT}: read the log of maps/resnet-g{running.pk}-worker-0: the API "
                               "server stopped sending it after ")  # fmt: skip
    assert pieces[0] == whole[: pieces[0].count(b"\n") * 12] and pieces[0].count(b"\n") == 300_000 // 12
    assert len(pieces) == 2 and b"".join(pieces) == whole


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096])
def test_lines_left_out_in_chunks_leave_what_follows_reading_as_in_the_whole(size):
    data = TRICKY[:40_000]
    lines = log_lines(data)
    for start in (0, 1, 2, 5, 77, len(lines) - 1, len(lines)):
        skipped = SkippedLines(start)
        rest = StreamedLines(start=start, last=line_digest(lines[start - 1]) if start else "")
        text = ""
        for at in range(0, len(data), size):
            text += rest.feed(skipped.feed(data[at : at + size]))
        skipped.end()
        text += rest.end()
        assert skipped.remaining == 0 and text == "".join(line + "\n" for line in lines[start:])
        assert skipped.last == (line_digest(lines[start - 1]) if start else "")
        assert rest.count == len(lines) and rest.last == line_digest(lines[-1])


def test_the_digest_of_a_line_passed_on_in_parts_is_that_of_the_whole_line():
    lines = StreamedLines(hold=4096)
    parts = "".join(lines.feed(b"x" * 1000) for _ in range(100)) + lines.feed(b"\nnext")
    assert parts == "x" * 100_000 + "\n" and lines.count == 1 and lines.last == line_digest("x" * 100_000)
    assert lines.end() == "next\n" and lines.count == 2 and lines.last == line_digest("next")


def test_a_log_with_fewer_lines_than_left_out_leaves_some_remaining():
    skipped = SkippedLines(5)
    assert skipped.feed(b"a\nb\nc") == b"" and skipped.remaining == 3
    skipped.end()  # the unended "c" counts, as a download ends it
    assert skipped.remaining == 2 and skipped.last == ""
