"""`gangway logs --all`: one replica's whole log written to standard output as it comes, each line once, reading
on from where a download stopped when the portal's time bound, the cluster or the connection cut it.

The portal's download reads on from a line (`?from=N&last=DIGEST`: the lines received, and the digest of the
last, which it checks is still the line there), and one it cut ends with a line saying so and giving both:
this command reads on from there by itself, up to CONTINUATIONS times, and writes only the log's own lines.
"""

from __future__ import annotations

import hashlib
import re
import sys

from gangway_cli import exits
from gangway_cli.client import ApiError, Client

CONTINUATIONS = 50  # downloads after the first: at most 40 s each, more than half an hour of downloading
# The longest line held back before it is written (bytes): a line is written once it has ended, so that a download
# cut in its middle reads on from its start without writing any of it twice. A longer one (the portal passes a
# line on in parts past 1 MiB of characters) is written as it comes, and a download cut within it cannot go on.
HOLD = 4 * 1024**2
DIGEST_CHARS = 16  # hex digits of the portal's digest of a line

# The starts of the last line of a download that does not end with the log (`scheduling.log_download`): its time bound
# or the cluster cut it (the rest's address then ends with `from=N&last=DIGEST`), or the lines it was to read
# on from are no longer the log's.
STOPPED = "... the download stopped here"
CUT_SHORT = "... the log is cut short here"
CHANGED = "... the log changed"
NOTES = (STOPPED.encode(), CUT_SHORT.encode(), CHANGED.encode())
REST = re.compile(rf"[?&]from=(\d+)(?:&last=([0-9a-f]{{{DIGEST_CHARS}}}))?$")
FROM_HEADER = "Gangway-Log-From"  # the line an answer starts at, which a portal that reads on sends


class Lines:
    """A binary file that writes a download's text to `out` a line at a time: each line once it has ended (one
    longer than HOLD as it comes), and a last line that reads like the portal's note of where the download
    ended (it starts like one of NOTES) only once more comes after it; at the answer's end, `end` gives it.

    `count` is how many lines have been written, from the log's start (`start` of them before this command),
    and `last` the digest of the last, as the portal digests a line (the first DIGEST_CHARS hex digits of the
    SHA-256 of its UTF-8, without the newline). `received` counts the bytes of the answer being read.
    """

    def __init__(self, out, *, start: int = 0):
        self.out, self.count, self.last = out, start, ""
        self.open: list[bytes] = []  # the start of the line not yet ended, held back
        self.held = 0  # its bytes
        self.spilling = None  # the SHA-256 so far of a line longer than HOLD, written as it comes
        self.note = b""
        self.received = 0

    def write(self, data: bytes) -> int:
        self.received += len(data)
        if data and self.note:
            self._lines(self.note)  # more came after it: a line of the log
            self.note = b""
        end = data.rfind(b"\n")
        if end < 0:
            self._hold(data)
            return len(data)
        ended, rest = data[: end + 1], data[end + 1 :]
        if not rest:  # the answer may end here: its last line may be the portal's note
            begins = ended.rfind(b"\n", 0, end) + 1
            if begins:
                last = ended[begins:]
            else:
                last = b"" if self.spilling else b"".join(self.open) + ended
            if last.startswith(NOTES):
                self.note, ended = last, ended[:begins]
                if not begins:  # the note began in what was held
                    self.open, self.held = [], 0
        self._lines(ended)
        self._hold(rest)
        return len(data)

    def answer(self) -> None:
        """Another answer starts: what the last one left unended (cut midway) is dropped, to come again whole."""
        self.open, self.held, self.note, self.received = [], 0, b"", 0

    def end(self) -> bytes:
        """The answer ended: writes what it left unended, and returns the note it ended with (b"" for none)."""
        for part in self.open:
            self.out.write(part)
        self.open, self.held = [], 0
        note, self.note = self.note, b""
        return note

    def keep(self, note: bytes) -> None:
        """Writes `note` as a line of the log: it only reads like the portal's."""
        self._lines(note)

    def _hold(self, data: bytes) -> None:
        if not data:
            return
        if self.spilling is None and self.held + len(data) <= HOLD:
            self.open.append(data)
            self.held += len(data)
            return
        if self.spilling is None:
            self.spilling = hashlib.sha256()
        for part in (*self.open, data):
            self.out.write(part)
            self.spilling.update(part)
        self.open, self.held = [], 0

    def _lines(self, data: bytes) -> None:
        """Writes what is held and `data`, which ends a line (b"": nothing to write)."""
        if not data:
            return
        parts, self.open, self.held = (*self.open, data), [], 0
        for part in parts:
            self.out.write(part)
        end = len(data) - 1
        begins = data.rfind(b"\n", 0, end) + 1
        if begins:
            digest = hashlib.sha256(data[begins:end])
        else:
            digest = self.spilling or hashlib.sha256()
            for part in parts[:-1]:
                digest.update(part)
            digest.update(data[:end])
        self.last, self.spilling = digest.hexdigest()[:DIGEST_CHARS], None
        self.count += data.count(b"\n")


class NotReadingOn(Exception):
    """The portal answered a download from a line with the log from another (an older one, without `from`)."""


def write_whole_log(client: Client, job_id: int, *, replica: str | None, start: int = 0, out=None, err=None) -> int:
    """Writes the replica's whole log (of the job's only replica, with None), from line `start` on, to `out`
    (standard output's bytes by default), as the portal sends it, however long, each line once; returns the
    exit code.

    A download the portal cut (its time bound, or the cluster stopped sending) or the connection dropped
    midway is read on from the line after the last written, up to CONTINUATIONS times, each saying so on
    standard error: 0 once the log is written whole. It stops, saying on standard error how many lines are
    written and the command that writes the rest, with 7 when a download brings no new line, the log changed
    since its first lines were written, the downloads run out, or the portal cannot read on; with the code of
    its status when the portal refuses a download after the first. A first download's error raises ApiError
    (a job of several replicas and none named is refused, 400, with their names). A log that ends with a line
    that only reads like the portal's note (an older portal's, which gives no line to read on from) is
    written whole and said on standard error, 0.
    """
    out, err = out or sys.stdout.buffer, err or sys.stderr
    lines = Lines(out, start=start)
    path = f"api/v1/jobs/{job_id}/logs/download/"
    for download in range(CONTINUATIONS + 1):
        before = lines.count
        lines.answer()
        query = {"replica": replica, "from": lines.count or None, "last": lines.last or None}
        check = _starts_at(lines.count) if lines.count else None
        try:
            client.download(path, lines, check=check, **query)
        except ApiError as error:
            out.flush()
            if error.status or not lines.received:  # refused, or out of reach: nothing came
                if download == 0 and lines.count == start:
                    raise
                return _stop(err, str(error), job_id, replica, lines, exits.for_status(error.status))
            why = str(error).rstrip(".")
            if lines.spilling is not None:
                return _stop(err, f"{why}, within line {lines.count + 1:,}, longer than {HOLD // 1024**2} MiB and "
                             "written in part", job_id, replica, lines, exits.UNAVAILABLE, rest=False)  # fmt: skip
        except NotReadingOn as error:
            out.flush()
            return _stop(err, str(error), job_id, replica, lines, exits.UNAVAILABLE, rest=False)
        else:
            note = lines.end()
            out.flush()
            if not note:
                return exits.OK
            text = note.decode("utf-8", "replace").rstrip("\n")
            if note.startswith(CHANGED.encode()):
                print(f"gangway: the log of job {job_id} changed since its first {lines.count:,} lines were written "
                      "(a container restarted, a pod was replaced or its log rotated): run the command again for "
                      "the whole of it.", file=err, flush=True)  # fmt: skip
                return exits.UNAVAILABLE
            rest = REST.search(text)
            if not rest or int(rest[1]) != lines.count or (rest[2] and rest[2] != lines.last):
                lines.keep(note)  # an older portal's note, or a line of the log that reads like one
                out.flush()
                print(f"gangway: the log of job {job_id} is cut short; its last line: {text}", file=err, flush=True)
                return exits.OK
            why = ("the portal stopped the download at its time bound" if note.startswith(STOPPED.encode())
                   else "the cluster stopped sending the log")  # fmt: skip
        if lines.count == before:
            return _stop(err, f"{why}, and no line came in that download", job_id, replica, lines, exits.UNAVAILABLE)
        if download < CONTINUATIONS:
            print(f"gangway: {why}; reading on after line {lines.count:,}.", file=err, flush=True)
    return _stop(err, f"{why}, and the log goes on after {CONTINUATIONS + 1} downloads", job_id, replica, lines,
                 exits.UNAVAILABLE)  # fmt: skip


def _starts_at(line: int):
    """The check of an answer's headers that it starts at `line`: a portal older than `?from=` sends the log
    from its start, which would write its lines twice."""

    def check(headers) -> None:
        if headers.get(FROM_HEADER) != str(line):
            raise NotReadingOn(f"the portal sent the log from another line than {line:,}, the one asked for: it "
                               "cannot read a download on (it is older than ?from=)")  # fmt: skip

    return check


def _stop(err, why: str, job_id: int, replica: str | None, lines: Lines, code: int, *, rest: bool = True) -> int:
    """Says why the log is not written whole, how many lines are, and (with `rest`) the command that writes the
    rest; returns `code`."""
    again = f"gangway logs {job_id}" + (f" --replica {replica}" if replica else "") + " --all"
    again += f" --from {lines.count}" if lines.count else ""
    after = f": the rest with `{again}`" if rest else ""
    print(f"gangway: {why.rstrip('.')}; {lines.count:,} lines of the log of job {job_id} written, each once{after}.",
          file=err, flush=True)  # fmt: skip
    return code
