"""REST API for a job's logs: each replica's recent lines, read on from a cursor, and one replica's whole log,
read on from a line when one download cannot carry it all.

Actions of the jobs viewset (`JobLogsActions`), so that a job's logs have the access rules of the job
itself: `get_object` answers 404 for a job the caller cannot see, whoever asks (a person, a user token,
a team token). Thin shells over `scheduling.logs`, `scheduling.log_cursor` and `scheduling.log_download`.
"""

from __future__ import annotations

import json
import re

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, renderers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from jobs.serializers import JobLogsSerializer
from scheduling.log_cursor import CURSOR_MAX, CURSOR_PATTERN, log_cursor, positions_of, read_cursor
from scheduling.log_download import (
    DIGEST_CHARS, DOWNLOAD_CHANGED, DOWNLOAD_CUT_SHORT, DOWNLOAD_SECONDS, DOWNLOAD_STOPPED, FROM_MAX, BadStart,
    download_start, log_download, rest_query,
)
from scheduling.logs import LOG_TAIL, LOG_TAIL_MAX, REPLICA_NAME, recent_logs
from tenants.schema_examples import ERROR

NAMES_LISTED = 10  # replicas a refusal names, of a job that has more
# The line of the log a download's body starts at (its `from`), sent before the body: a reader that reads on from
# a line checks it, so that a portal that does not read on (older than `from`) never has it write a line twice.
FROM_HEADER = "Gangway-Log-From"


class LogTextRenderer(renderers.BaseRenderer):
    """`Accept: text/plain`, as a download's reader may ask: the log itself is text, and an error the API's
    body (`{"detail": ...}` or a field dict) as JSON text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return b"" if data is None else json.dumps(data, ensure_ascii=False).encode()


def asked_replica(request) -> str:
    """`?replica=`, "" when absent; ValidationError naming the field for a name no replica can have."""
    replica = request.query_params.get("replica", "")
    if replica and not re.fullmatch(REPLICA_NAME, replica):
        raise exceptions.ValidationError({"replica": [
            f"Not a replica's name: {replica[:80]!r}; replicas are named like worker-0, or by their pod."]})
    return replica


class JobLogsActions:
    """The logs actions of `jobs.api.JobViewSet`, which gives `get_object`."""

    @extend_schema(
        summary="A job's logs: each replica's recent lines, and the replica that failed",
        description="Read from the cluster when asked. A job that never ran has no replicas. Another team's job "
        "answers 404, as it does everywhere. To follow a log, read it once, then again with `?cursor=` set to the "
        "last answer's `cursor`: each answer then holds only the lines written since. The whole log of a replica: "
        "`logs/download/`.",
        tags=["jobs"],
        parameters=[
            OpenApiParameter("replica", str, OpenApiParameter.QUERY, required=False, pattern=f"^{REPLICA_NAME}$",
                             description="Only this replica, e.g. worker-0."),
            OpenApiParameter("tail", {"type": "integer", "minimum": 1, "maximum": LOG_TAIL_MAX},
                             OpenApiParameter.QUERY, required=False,
                             description=f"Lines of each replica, 1 to {LOG_TAIL_MAX} (default {LOG_TAIL}); with "
                             "`cursor`, the most of each replica's new lines one answer holds."),
            OpenApiParameter("cursor", {"type": "string", "pattern": CURSOR_PATTERN, "maxLength": CURSOR_MAX},
                             OpenApiParameter.QUERY, required=False,
                             description="The `cursor` of an earlier answer: each replica's lines written after "
                             "that answer's last line, each once however often its text repeats, the newest "
                             "`tail` of them; `skipped` counts those left out before them. A replica the cursor "
                             "does not know reads from the start of its log."),
        ],
        responses={200: JobLogsSerializer, 400: OpenApiResponse(ERROR), 401: OpenApiResponse(ERROR),
                   404: OpenApiResponse(ERROR),
                   503: OpenApiResponse(ERROR, description="The cluster could not be read.")},
    )  # fmt: skip
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def logs(self, request, pk=None):
        job = self.get_object()
        replica = request.query_params.get("replica", "")
        tail = request.query_params.get("tail", str(LOG_TAIL))
        if not (tail.isascii() and tail.isdigit() and len(tail) <= 4 and 1 <= int(tail) <= LOG_TAIL_MAX):
            raise exceptions.ValidationError({"tail": [f"Lines per replica, a whole number from 1 to {LOG_TAIL_MAX}."]})
        after = None
        if "cursor" in request.query_params:
            try:
                after = read_cursor(request.query_params["cursor"])
            except ValueError:
                raise exceptions.ValidationError({"cursor": [
                    "Not a cursor of this job's logs: pass back the `cursor` of an earlier answer, as it was."
                ]}) from None  # fmt: skip
        # Shared with other readers for a few seconds; always timed, so that every answer has a cursor.
        found = recent_logs(job, replica=replica, tail=int(tail), timed=True, after=after)
        if found.unavailable:
            return Response({"detail": found.unavailable}, status.HTTP_503_SERVICE_UNAVAILABLE)
        if replica and not found.replicas:
            raise exceptions.NotFound(f"Job {job.pk} has no replica {replica[:80]!r} with logs.")
        body = {"job": job.pk, "state": job.state, "failure": found.failure, "replicas": found.replicas,
                "cursor": log_cursor(positions_of(found, after))}  # fmt: skip
        return Response(JobLogsSerializer(body).data)

    @extend_schema(
        summary="One replica's whole log, as text",
        description="The replica's whole log, however long, read from the cluster as it is sent (`text/plain`, "
        "UTF-8, as an attachment): its lines as the logs endpoint gives them (a progress bar's `\\r` rewrites "
        "read as their last state, ANSI escape sequences removed, other control characters and bytes that are "
        "not UTF-8 as U+FFFD), each ended by a newline. Without `replica`, a job of one replica gives its log and "
        "a job of several answers 400 naming them. Another team's job answers 404, as it does everywhere.\n\n"
        f"A download takes at most {DOWNLOAD_SECONDS:g} s. One that took longer ends, between two lines, with a "
        f"line starting `{DOWNLOAD_STOPPED}`, and one the cluster stopped sending midway with a line starting "
        f"`{DOWNLOAD_CUT_SHORT}`; each says where the rest is, a URL of this endpoint ending "
        "`from=N&last=DIGEST`: the lines received so far and the digest of the last. Ask for it, and so on until "
        "an answer ends without such a line: the answers put end to end, less those lines, are the log, each "
        "line once. `from` counts lines at `\\n`, as the kubelet does, so it is exact for a log that has not "
        "changed; with `last`, an answer starts only if the line before it is still the one received, and "
        f"otherwise is one line starting `{DOWNLOAD_CHANGED}` (a container restarted, a pod was replaced or its "
        "log rotated). The header `" + FROM_HEADER + "` gives the line the body starts at. Each answer reads the "
        "lines before `from` again from the cluster, without sending them. `gangway logs ID --all` writes the "
        "whole log to standard output, reading on by itself.",
        tags=["jobs"],
        parameters=[
            OpenApiParameter("replica", str, OpenApiParameter.QUERY, required=False, pattern=f"^{REPLICA_NAME}$",
                             description="The replica, e.g. worker-0; may be left out for a job of one replica."),
            OpenApiParameter("from", {"type": "integer", "minimum": 0, "maximum": FROM_MAX},
                             OpenApiParameter.QUERY, required=False,
                             description="Lines of the log already received (default 0): the answer starts at the "
                             "line after them. A download cut short says the value to read on with."),
            OpenApiParameter("last", {"type": "string", "pattern": f"^[0-9a-f]{{{DIGEST_CHARS}}}$"},
                             OpenApiParameter.QUERY, required=False,
                             description="With `from` of 1 or more, the digest of the last line received, as a "
                             f"download cut short gives it (the first {DIGEST_CHARS} hex digits of the SHA-256 of "
                             "the line's UTF-8, without its newline): the answer then starts only where that line "
                             "still is. Ignored with no `from`."),
        ],
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="The log, from line `from`."),
                   400: OpenApiResponse(ERROR, description="No replica named, of a job of several; a name no "
                                        "replica can have; a `from` or `last` no download gives."),
                   401: OpenApiResponse(ERROR), 404: OpenApiResponse(ERROR),
                   503: OpenApiResponse(ERROR, description="The cluster could not be read.")},
    )  # fmt: skip
    # JSON for errors (DRF's own renderer: this action's messages quote nothing but the names its checks let
    # through), or text for a reader that asks for text alone.
    @action(detail=True, methods=["get"], url_path="logs/download", url_name="logs-download", filter_backends=[],
            pagination_class=None, renderer_classes=[renderers.JSONRenderer, LogTextRenderer])  # fmt: skip
    def logs_download(self, request, pk=None):
        job = self.get_object()
        replica = asked_replica(request)
        try:
            start, last = download_start(request.query_params)
        except BadStart as bad:
            raise exceptions.ValidationError({bad.field: [str(bad)]}) from None

        def rest(name: str, lines: int, digest: str) -> str:
            return request.build_absolute_uri(f"{request.path}?{rest_query(lines, digest, replica=name)}")

        found = log_download(job, replica=replica, start=start, last=last, rest=rest)
        if found.unavailable:
            return Response({"detail": found.unavailable}, status.HTTP_503_SERVICE_UNAVAILABLE)
        if found.replicas:
            names = ", ".join(found.replicas[:NAMES_LISTED])
            more = f" and {len(found.replicas) - NAMES_LISTED} more" if len(found.replicas) > NAMES_LISTED else ""
            raise exceptions.ValidationError({"replica": [
                f"Job {job.pk} has {len(found.replicas)} replicas ({names}{more}); name the one whose log to "
                "download, e.g. ?replica=" + found.replicas[0] + "."]})  # fmt: skip
        if found.body is None:
            which = f"no replica {replica!r}" if replica else "no replicas"
            raise exceptions.NotFound(f"Job {job.pk} has {which} with logs.")
        response = StreamingHttpResponse(found.body, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{job.name}-{job.pk}-{found.replica.replica}.log"'
        response[FROM_HEADER] = str(start)
        return response
