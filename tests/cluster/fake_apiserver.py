"""A small Kubernetes API server over real HTTP, for testing the adapter.

It stores objects by group/version/namespace/plural/name and answers as the
real server does: resourceVersion, uid and creationTimestamp assigned on
write; LIST with labelSelector, fieldSelector (the fields the real server
selects on for each resource, 400 for others) and pages (`limit` and
`continue`, every page from the snapshot of the first; 410 Gone once etcd
would have compacted past it); POST answering 409 AlreadyExists; PUT, and a
merge patch carrying metadata.resourceVersion, answering 409 Conflict on a
stale one; merge, strategic-merge (treated as a merge: enough for the maps
Gangway patches) and JSON patches; the status subresource (`{name}/status`)
writing only the status, the object itself every field but the status;
DELETE answering 404 NotFound; watches that end at once and answer 410 Gone
for a compacted resourceVersion; a pod's log as the kubelet serves it (`pods/{name}/log`: bytes, lines
counted by "\n" alone, with tailLines, limitBytes cutting the bytes wherever it falls, sinceSeconds and
sinceTime (in whole seconds, as the API server passes it on; applied to the tail's lines, as the kubelet
does), timestamps (Go's RFC3339Nano), previous; 400 while its container waits to start, or for a previous
container it never had; streamed in chunks of the chunked transfer coding as it is made, never held whole,
so that a log of any size can be written and read; `cut_log` stops the next one midway); a
SelfSubjectAccessReview answered as RBAC would for an account bound to the rules `authorize` gives (its
spec.resourceAttributes: verb, group, resource, subresource, name), every one allowed until then, as every
request is. Errors are v1 Status objects. Faults can be injected for the next N requests
matching a method and a path, and another writer's change made just before one is
answered (`before`).
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from jobs import kinds

# Resources without a namespace; everything else lives in one.
CLUSTER_SCOPED = {
    "nodes", "namespaces", "priorityclasses", "queues", "customresourcedefinitions",
    "clustertrainingruntimes", "validatingadmissionpolicies", "validatingadmissionpolicybindings",
}

# kind -> (group/version path prefix, plural), for seeding and reading objects.
KINDS = {
    "Node": ("api/v1", "nodes"),
    "Namespace": ("api/v1", "namespaces"),
    "Pod": ("api/v1", "pods"),
    "PersistentVolumeClaim": ("api/v1", "persistentvolumeclaims"),
    "ResourceQuota": ("api/v1", "resourcequotas"),
    "LimitRange": ("api/v1", "limitranges"),
    "PriorityClass": ("apis/scheduling.k8s.io/v1", "priorityclasses"),
    "CustomResourceDefinition": ("apis/apiextensions.k8s.io/v1", "customresourcedefinitions"),
    "Queue": ("apis/scheduling.volcano.sh/v1beta1", "queues"),
    "PodGroup": ("apis/scheduling.volcano.sh/v1beta1", "podgroups"),
    "ClusterTrainingRuntime": ("apis/trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes"),
    "Event": ("api/v1", "events"),
    "Trial": ("apis/kubeflow.org/v1beta1", "trials"),
    "Experiment": ("apis/kubeflow.org/v1beta1", "experiments"),
    "ValidatingAdmissionPolicy": ("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies"),
    "ValidatingAdmissionPolicyBinding": ("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings"),
}



# The fields a list can select on besides metadata.name and metadata.namespace, which every resource
# takes (the API server's field label conversions); a custom resource takes only those two.
SELECTABLE_FIELDS = {
    ("api/v1", "pods"): {
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    },
    ("api/v1", "nodes"): {"spec.unschedulable"},
}
BOOLEAN_FIELDS = {"spec.hostNetwork", "spec.unschedulable"}  # a missing one reads "false", as Go's zero value

# What the server says of a continue token older than etcd's history (k8s.io/apiserver's storage errors).
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may "
    "show up in the list."
)


def kind_path(kind: str) -> tuple[str, str]:
    """Returns (group/version path prefix, plural) of a kind: a built-in one, or a job kind of the registry."""
    if kind in KINDS:
        return KINDS[kind]
    job_kind = kinds.get(kind)
    return f"apis/{job_kind.api_version}", job_kind.plural


REASONS = {
    400: "BadRequest", 404: "NotFound", 409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType",
    422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
}

_PATH = re.compile(
    r"^/(?P<prefix>api/v1|apis/[^/]+/[^/]+)"
    r"(?:/namespaces/(?P<namespace>[^/]+)(?=/[^/]+))?"
    r"/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status|log))?$"
)


class ApiError(Exception):
    def __init__(self, code: int, message: str, reason: str | None = None, details: dict | None = None,
                 body: dict | None = None):  # fmt: skip
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, HTTPStatus(code).phrase.replace(" ", ""))
        self.details = details or {}
        self.body = body  # the whole Status, when it is not the usual one


def status(code: int, message: str, reason: str | None = None, details: dict | None = None) -> dict:
    """Returns a v1 Status body as the API server sends it for a failure."""
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason or REASONS.get(code, HTTPStatus(code).phrase),
        "details": details or {}, "code": code,
    }


DROP = 0  # a fault's code: close the connection without an answer
STALL = 1  # a fault's code: wait its `seconds`, then answer as usual
LOG_PIECE = 256 * 1024  # bytes of a log in one chunk of the transfer coding, as the API server passes them on


@dataclass
class LogBody:
    """A pod's log as it is sent: `pieces` made as they are written, and the connection closed once `cut_after`
    bytes went out (None: all of them)."""

    pieces: Iterator[bytes]
    cut_after: int | None = None


@dataclass
class Fault:
    code: int
    method: str | None
    path: re.Pattern
    times: int
    retry_after: int | None
    message: str
    seconds: float = 0.0  # how long a STALL waits


def merge_patch(target, patch):
    """Returns `target` with an RFC 7386 merge patch applied (null deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict, operations: list) -> dict:
    """Returns `target` with RFC 6902 add/replace/remove/test operations applied."""
    result = copy.deepcopy(target)
    for op in operations:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = result
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            {"add": lambda: node.insert(index, op["value"]),
             "replace": lambda: node.__setitem__(index, op["value"]),
             "remove": lambda: node.pop(index)}[op["op"]]()
        elif op["op"] in ("add", "replace"):
            node[last] = op["value"]
        elif op["op"] == "remove":
            del node[last]
        elif op["op"] == "test" and node.get(last) != op["value"]:
            raise ApiError(422, f"the server rejected our request due to an error in our request: test failed at {op['path']}")
    return result


def _matches(labels: dict, selector: str) -> bool:
    """Returns whether labels satisfy a selector of `k`, `!k`, `k=v`, `k==v`, `k!=v` terms."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            ok = labels.get(key.strip()) != value.strip()
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            ok = labels.get(key.strip()) == value.strip()
        elif term.startswith("!"):
            ok = term[1:].strip() not in labels
        elif re.fullmatch(r"[\w./-]+", term):
            ok = term in labels
        else:
            raise ApiError(400, f"unable to parse requirement: {term!r}")
        if not ok:
            return False
    return True


def _field_selector(resource: tuple[str, str], text: str) -> list[tuple[str, str, str]]:
    """Returns the (field, operator, value) terms of a field selector ("spec.nodeName!=,status.phase=Running":
    `=`, `==` or `!=`, terms ANDed, `\\`-escaped commas and equals signs in values), as the real server parses
    it; 400 for a term it cannot read or a field the resource cannot be selected on."""
    terms = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        at = next(((i, op) for i in range(len(term)) for op in ("!=", "==", "=") if term.startswith(op, i)), None)
        if at is None:
            raise ApiError(400, f"invalid selector: '{text}'; can't understand '{term}'")
        index, operator = at
        field, value = term[:index].strip(), term[index + len(operator):]
        if field not in {"metadata.name", "metadata.namespace"} | SELECTABLE_FIELDS.get(resource, set()):
            raise ApiError(400, f"field label not supported: {field}")
        terms.append((field, "!=" if operator == "!=" else "=", re.sub(r"\\(.)", r"\1", value)))
    return terms


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in text:
        if char == separator and not escaped:
            parts.append(current)
            current = ""
            continue
        current += char
        escaped = char == "\\" and not escaped
    return [*parts, current]


def _field_value(obj: dict, field: str) -> str:
    """Returns an object's field as a field selector compares it: text, "" when it is missing."""
    value = obj
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if field in BOOLEAN_FIELDS:
        return "true" if value else "false"
    return "" if value is None else str(value)


def _fields_match(obj: dict, terms: list[tuple[str, str, str]]) -> bool:
    return all((_field_value(obj, field) == value) == (operator == "=") for field, operator, value in terms)


def _key(namespace: str | None, name: str) -> str:
    """An object's place in a list: its etcd key below the resource's prefix, whose byte order lists follow."""
    return f"{namespace}/{name}" if namespace is not None else name


def _continue_token(revision: int, after: str) -> str:
    """A continue token as the real server encodes it: the list's revision and the key to start from."""
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": after + "\x00"})
    return base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def _read_continue(token: str) -> tuple[int, str]:
    """Returns (revision, start key) of a continue token; 400 for one the server did not make."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(data["rv"]), str(data["start"])
    except (ValueError, TypeError, KeyError) as error:
        raise ApiError(400, f"continue key is not valid: {error}") from error


def _lines(data: bytes) -> list[bytes]:
    """A log's lines as the kubelet counts them: ended by "\\n" alone, each keeping it."""
    parts = data.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _log_pieces(lines: list[tuple[datetime, bytes]], stamped: bool, limit: int | None) -> Iterator[bytes]:
    """The bytes of `lines` (each after its time with `stamped`), at most `limit` of them, wherever the limit
    falls (in a character too), in pieces of about LOG_PIECE bytes made as they are sent."""
    piece, left = [], limit
    size = 0
    for when, line in lines:
        data = (_stamp(when) + b" " if stamped else b"") + line
        if left is not None:
            data, left = data[:left], left - min(left, len(data))
        piece.append(data)
        size += len(data)
        if size >= LOG_PIECE:
            yield b"".join(piece)
            piece, size = [], 0
        if left == 0:
            break
    if piece:
        yield b"".join(piece)


def _stamp(when: datetime) -> bytes:
    """The kubelet's timestamp of a line: Go's RFC3339Nano in UTC, which drops the fraction's trailing zeros
    (and its dot when nothing is left)."""
    fraction = f"{when.microsecond * 1000:09d}".rstrip("0")
    seconds = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return (seconds + (f".{fraction}" if fraction else "") + "Z").encode()


class FakeApiServer:
    """The store and the HTTP server; `url` is what a kubernetes Configuration's host takes."""

    def __init__(self):
        self._lock = threading.RLock()
        self._versions = itertools.count(1)
        self.objects: dict[tuple, dict] = {}  # (prefix, plural, namespace, name) -> object
        self.log: list[tuple[str, str]] = []  # (method, path) of every request
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, query) of every request
        self.listed: list[tuple[str, tuple[str, ...]]] = []  # (path, "namespace/name" of each item) of each page
        self.patches: list[tuple[str, dict]] = []  # (path, body) of every PATCH, as sent
        # (namespace, pod, previous) -> what its container (its previous one) wrote: (when, line with its "\n")
        self.pod_logs: dict[tuple[str, str, bool], list[tuple[datetime, bytes]]] = {}
        self.dry_runs: list[tuple[str, str]] = []  # (method, path) of every write asked as a dry run
        self.access_reviews: list[dict] = []  # spec.resourceAttributes of every SelfSubjectAccessReview
        self._log_cuts: list[int] = []  # bytes after which the next logs answered stop (`cut_log`)
        self._faults: list[Fault] = []
        self._rules: list[dict] | None = None  # what access reviews are answered from (`authorize`); None: all allowed
        self._events: list[tuple[int, str, tuple, dict]] = []  # (rv, type, key, object)
        self._compacted = 0
        self._revision = 0  # etcd's: the last write's, deletes included
        self._snapshots: dict[int, dict[tuple, dict]] = {}  # revision -> objects, for the pages of lists under way
        self._between_pages: list[tuple[re.Pattern, Callable[[], None], list[int]]] = []
        self._before: list[tuple[str | None, re.Pattern, Callable[[], None], list[int]]] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeApiServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def reset(self) -> None:
        with self._lock:
            self.objects.clear()
            self.log.clear()
            self.requests.clear()
            self.listed.clear()
            self.patches.clear()
            self.pod_logs.clear()
            self.dry_runs.clear()
            self.access_reviews.clear()
            self._log_cuts.clear()
            self._faults.clear()
            self._rules = None
            self._events.clear()
            self._snapshots.clear()
            self._between_pages.clear()
            self._before.clear()

    # -- seeding and reading, for tests --------------------------------------

    def add(self, obj: dict) -> dict:
        """Stores an object as a POST would, ignoring conflicts; returns the stored copy."""
        prefix, plural = kind_path(obj["kind"])
        meta = obj["metadata"]
        with self._lock:
            return self._write((prefix, plural, meta.get("namespace"), meta["name"]), obj, "ADDED")

    def write_log(self, namespace: str, pod: str, text: str | bytes, *, previous: bool = False,
                  at: datetime | None = None, step: timedelta = timedelta(milliseconds=1)) -> None:
        """Sets what the pod's container (its previous one, with `previous`) has written so far: each line
        written at `at` (now by default) plus `step` for each line before it."""
        data = text.encode() if isinstance(text, str) else text
        start = at or datetime.now(timezone.utc)
        lines = _lines(data)
        with self._lock:
            self.pod_logs[(namespace, pod, previous)] = [(start + step * n, line) for n, line in enumerate(lines)]

    def append_log(self, namespace: str, pod: str, text: str | bytes, *, at: datetime | None = None) -> None:
        """Adds lines to what the pod's container has written, each written at `at` (now by default)."""
        data = text.encode() if isinstance(text, str) else text
        when = at or datetime.now(timezone.utc)
        with self._lock:
            self.pod_logs.setdefault((namespace, pod, False), []).extend((when, line) for line in _lines(data))

    def cut_log(self, after: int) -> None:
        """Makes the next log answered stop after `after` bytes, its connection closed: a kubelet or an API server
        that went away while it sent a log."""
        with self._lock:
            self._log_cuts.append(after)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        prefix, plural = kind_path(kind)
        with self._lock:
            return copy.deepcopy(self.objects.get((prefix, plural, namespace, name)))

    def list(self, kind: str) -> list[dict]:
        prefix, plural = kind_path(kind)
        with self._lock:
            return [copy.deepcopy(o) for k, o in self.objects.items() if k[:2] == (prefix, plural)]

    def lists(self) -> list[tuple[str, dict[str, str]]]:
        """Returns (path, query) of every list requested so far (a watch is not one), in order."""
        with self._lock:
            requests = list(self.requests)
        return [(path, query) for method, path, query in requests if method == "GET" and "watch" not in query
                and (match := _PATH.match(path)) and match.group("name") is None]  # fmt: skip

    def fail(self, code: int, *, path: str = ".*", method: str | None = None, times: int = 1,
             retry_after: int | None = None, message: str = "") -> None:
        """Makes the next `times` requests matching `method` and the `path` regex answer `code`."""
        with self._lock:
            self._faults.append(Fault(code, method, re.compile(path), times, retry_after,
                                      message or f"injected {code}"))

    def stall(self, seconds: float, *, path: str = ".*", method: str | None = None, times: int = 1) -> None:
        """Makes the next `times` matching requests wait `seconds` before they are answered as usual,
        as an overloaded server does."""
        with self._lock:
            self._faults.append(Fault(STALL, method, re.compile(path), times, None, "", seconds))

    def drop(self, *, path: str = ".*", method: str | None = None, times: int = 1) -> None:
        """Makes the next `times` matching requests end with the connection closed and no answer,
        as a server restarting or a load balancer dropping the connection does."""
        self.fail(DROP, path=path, method=method, times=times)

    def authorize(self, rules: list[dict]) -> None:
        """Answers each SelfSubjectAccessReview from now on as RBAC would for an account bound to `rules` (a
        ClusterRole's) alone. Requests themselves are still all served."""
        with self._lock:
            self._rules = copy.deepcopy(rules)

    def heal(self) -> None:
        """Drops the faults not yet answered: the server is healthy again."""
        with self._lock:
            self._faults.clear()

    def compact(self) -> None:
        """Forgets history: watches from any earlier resourceVersion, and lists continued from an
        earlier revision, answer 410 Gone."""
        with self._lock:
            self._compacted = self._revision
            self._events.clear()
            self._snapshots = {rv: objects for rv, objects in self._snapshots.items() if rv >= self._compacted}

    def expire_continue_tokens(self) -> None:
        """As on a busy cluster: writes elsewhere (leases, events) move etcd's revision on, then etcd
        compacts its history; every list under way answers its next page 410 Gone, reason Expired."""
        with self._lock:
            self._revision = next(self._versions)
            self.compact()

    def between_pages(self, action: Callable[[], None], *, path: str = ".*", times: int = 1) -> None:
        """Runs `action` after each of the next `times` pages of a list on `path` (a regex) that is not its
        last page, before the client asks for the next: what the cluster does while a long list is read."""
        with self._lock:
            self._between_pages.append((re.compile(path), action, [times]))

    def before(self, action: Callable[[], None], *, path: str = ".*", method: str | None = None,
               times: int = 1) -> None:
        """Runs `action` just before each of the next `times` requests matching `method` and the `path` regex is
        answered: what the cluster's other writers do between Gangway's read and its write (an owner deleting
        the object, a controller updating it)."""
        with self._lock:
            self._before.append((method, re.compile(path), action, [times]))

    def _run_before(self, method: str, path: str) -> None:
        for wanted, pattern, action, left in list(self._before):
            if wanted in (None, method) and pattern.search(path):
                left[0] -= 1
                if left[0] <= 0:
                    self._before.remove((wanted, pattern, action, left))
                action()
                return

    # -- the API -------------------------------------------------------------

    def _write(self, key: tuple, obj: dict, event: str) -> dict:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        self._revision = next(self._versions)
        meta["resourceVersion"] = str(self._revision)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        if key[2] is not None:
            meta["namespace"] = key[2]
        self.objects[key] = obj
        self._events.append((int(meta["resourceVersion"]), event, key, obj))
        return copy.deepcopy(obj)

    def _dry(self, key: tuple, obj: dict) -> dict:
        """The answer of a write asked as a dry run (`dryRun=All`): the object as it would be stored, storing nothing."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        if key[2] is not None:
            meta["namespace"] = key[2]
        return obj

    def _fault(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if (fault.method in (None, method)) and fault.path.search(path):
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def answer(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict, dict]:
        """Returns (status code, body, extra headers) for one request."""
        url = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        with self._lock:
            self.log.append((method, url.path))
            self.requests.append((method, url.path, query))
            if "dryRun" in query:
                self.dry_runs.append((method, url.path))
            fault = self._fault(method, url.path)
        if fault and fault.code == STALL:
            time.sleep(fault.seconds)  # outside the lock: other requests go on meanwhile
            fault = None
        with self._lock:
            self._run_before(method, url.path)
            if fault:
                extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                return fault.code, status(fault.code, fault.message), extra
            try:
                return self._serve(method, url.path, query, headers, body)
            except ApiError as error:
                return error.code, error.body or status(error.code, error.message, error.reason, error.details), {}

    def _serve(self, method, path, query, headers, body):
        match = _PATH.match(path)
        if not match:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        prefix, namespace, plural, name, sub = match.group("prefix", "namespace", "plural", "name", "sub")
        if plural in CLUSTER_SCOPED and namespace:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        key = (prefix, plural, namespace, name)
        group = prefix.split("/")[1] if prefix.startswith("apis/") else ""
        resource = f"{plural}.{group}" if group else plural
        details = {"name": name, "group": group, "kind": plural}

        if method == "GET" and name is None:
            return self._list(path, prefix, plural, namespace, query)
        if (prefix, plural, method) == ("apis/authorization.k8s.io/v1", "selfsubjectaccessreviews", "POST"):
            return 201, self._access_review(json.loads(body)), {}
        dry_run = method in ("POST", "PUT", "PATCH", "DELETE") and "dryRun" in query
        if dry_run and query["dryRun"] != "All":
            raise ApiError(400, f'invalid dry run option: {query["dryRun"]}')
        if method == "POST" and name is None:
            obj = json.loads(body)
            name = obj.get("metadata", {}).get("name")
            if not name:
                raise ApiError(422, f"{plural} \"\" is invalid: metadata.name: Required value: name or generateName is required")
            if namespace and ("api/v1", "namespaces", None, namespace) not in self.objects:
                raise ApiError(404, f'namespaces "{namespace}" not found',
                               details={"name": namespace, "kind": "namespaces"})
            key = (prefix, plural, namespace, name)
            if key in self.objects:
                raise ApiError(409, f'{resource} "{name}" already exists', "AlreadyExists",
                               {**details, "name": name})
            if dry_run:
                return 201, self._dry(key, obj), {}
            return 201, self._write(key, obj, "ADDED"), {}
        if name is None:
            raise ApiError(405, f"{method} is not allowed on a collection")
        current = self.objects.get(key)
        if current is None:
            raise ApiError(404, f'{resource} "{name}" not found', details=details)
        if sub == "log":
            if (plural, method) != ("pods", "GET"):
                raise ApiError(405, f"{method} is not allowed on {plural}/log")
            return self._pod_log(current, query)
        if method == "GET":
            return 200, copy.deepcopy(current), {}
        if method == "DELETE":
            if dry_run:
                return 200, copy.deepcopy(current), {}
            del self.objects[key]
            self._revision = next(self._versions)
            self._events.append((self._revision, "DELETED", key, current))
            return 200, copy.deepcopy(current), {}
        if method == "PUT":
            obj = json.loads(body)
            sent = obj.get("metadata", {}).get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                raise ApiError(409, f'Operation cannot be fulfilled on {resource} "{name}": the object '
                               "has been modified; please apply your changes to the latest version and try again",
                               details=details)
        elif method == "PATCH":
            patch = json.loads(body)
            if not dry_run:
                self.patches.append((path, copy.deepcopy(patch)))
            content_type = headers.get("Content-Type", "").split(";")[0]
            if content_type == "application/json-patch+json":
                obj = json_patch(current, patch)
            elif content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                # A resourceVersion in the patch is a precondition, as for a PUT.
                sent = (patch.get("metadata") or {}).get("resourceVersion") if isinstance(patch, dict) else None
                if sent and sent != current["metadata"]["resourceVersion"]:
                    raise ApiError(409, f'Operation cannot be fulfilled on {resource} "{name}": the object '
                                   "has been modified; please apply your changes to the latest version and try again",
                                   details=details)
                obj = merge_patch(current, patch)
            else:
                raise ApiError(415, f"the body of the request was in an unknown format - accepted media "
                               f"types include: application/json-patch+json, application/merge-patch+json ({content_type})")
        else:
            raise ApiError(405, f"{method} is not allowed")
        obj.setdefault("metadata", {})
        for kept in ("uid", "creationTimestamp", "name", "namespace"):
            if kept in current["metadata"]:
                obj["metadata"][kept] = current["metadata"][kept]
        if sub == "status":
            obj = {**current, "status": obj.get("status")}
        elif "status" in current:
            obj["status"] = current["status"]  # the main resource ignores status changes
        else:
            obj.pop("status", None)  # even on an object with no status yet
        if dry_run:
            return 200, self._dry(key, obj), {}
        return 200, self._write(key, obj, "MODIFIED"), {}

    def _access_review(self, review: dict) -> dict:
        """The review with its status, as the API server answers it: allowed when a rule grants its verb on its
        group and resource ("resource/subresource" for a subresource; "*" and "*/subresource" match too), and
        its name when the rule lists resourceNames. RBAC never denies, so a review it does not allow is only
        not allowed (no `denied`)."""
        spec = review.get("spec") or {}
        attributes = spec.get("resourceAttributes")
        if not attributes or spec.get("nonResourceAttributes"):
            raise ApiError(422, 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
                                "Invalid value: exactly one of nonResourceAttributes or resourceAttributes "
                                "must be specified")  # fmt: skip
        self.access_reviews.append(copy.deepcopy(attributes))
        resource, sub = attributes.get("resource", ""), attributes.get("subresource", "")
        wanted = {"*", f"{resource}/{sub}", f"*/{sub}"} if sub else {"*", resource}
        allowed = self._rules is None or any(
            {"*", attributes.get("verb", "")} & set(rule.get("verbs") or ())
            and {"*", attributes.get("group", "")} & set(rule.get("apiGroups") or ())
            and wanted & set(rule.get("resources") or ())
            and (not rule.get("resourceNames") or attributes.get("name") in rule["resourceNames"])
            for rule in self._rules
        )
        answer = {"allowed": True, "reason": "RBAC: allowed by the fake's rules"} if allowed else {"allowed": False}
        return {**review, "metadata": {"creationTimestamp": None}, "status": answer}

    def _pod_log(self, pod: dict, query: dict):
        """The container's log as text, as the kubelet serves it through the API server."""
        meta = pod["metadata"]
        names = [c.get("name", "") for c in pod.get("spec", {}).get("containers") or [{}]]
        container = query.get("container")
        if container is None and len(names) > 1:
            raise ApiError(400, f"a container name must be specified for pod {meta['name']}, choose one of: "
                                f"[{' '.join(names)}]")  # fmt: skip
        container = container or names[0]
        if container not in names:
            raise ApiError(400, f"container {container} is not valid for pod {meta['name']}")
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        found = next((s for s in statuses if s.get("name") == container), statuses[0])
        state = found.get("state") or {}
        previous = query.get("previous", "").lower() in ("1", "true")
        if previous and not (found.get("lastState") or {}).get("terminated"):
            raise ApiError(400, f'previous terminated container "{container}" in pod "{meta["name"]}" not found')
        if not previous and ("waiting" in state or not state):
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            raise ApiError(400, f'container "{container}" in pod "{meta["name"]}" is waiting to start: {reason}')
        lines = list(self.pod_logs.get((meta.get("namespace"), meta["name"], previous), []))  # as at the request
        if "tailLines" in query:  # the kubelet finds the tail's start first, then skips lines before `since`
            tail = int(query["tailLines"])
            lines = lines[-tail:] if tail else []
        since = None
        if "sinceSeconds" in query:
            since = datetime.now(timezone.utc) - timedelta(seconds=int(query["sinceSeconds"]))
        elif "sinceTime" in query:
            # The API server hands sinceTime on to the kubelet in whole seconds (RFC 3339 without a fraction).
            since = datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00")).replace(microsecond=0)
        if since is not None:
            lines = [(when, line) for when, line in lines if when >= since]
        stamped = query.get("timestamps", "").lower() in ("1", "true")
        limit = int(query["limitBytes"]) if "limitBytes" in query else None
        return 200, LogBody(_log_pieces(lines, stamped, limit), self._log_cuts.pop(0) if self._log_cuts else None), {}

    def _list(self, path, prefix, plural, namespace, query):
        """A list, whole or one page of it. Like etcd, a page reads keys in order after the token's start key
        until `limit` items matched; it has a continue token when keys are left (the last page may then be
        empty), and every page reads the snapshot of the revision of the first."""
        selector = query.get("labelSelector", "")
        if query.get("watch", "").lower() in ("1", "true"):
            return self._watch(prefix, plural, namespace, query, selector)
        fields = _field_selector((prefix, plural), query.get("fieldSelector", ""))
        limit = int(query.get("limit") or 0)
        if query.get("continue"):
            if query.get("resourceVersion"):
                raise ApiError(400, "specifying resource version is not allowed when using continue")
            revision, start = _read_continue(query["continue"])
            if revision == -1:  # the token of a 410: the rest of the list as it is now
                revision, objects = self._revision, self.objects
            elif revision < self._compacted or revision not in self._snapshots:
                token = _continue_token(-1, start.removesuffix("\x00"))
                raise ApiError(410, CONTINUE_EXPIRED, "Expired", body={
                    "kind": "Status", "apiVersion": "v1", "metadata": {"continue": token}, "status": "Failure",
                    "message": CONTINUE_EXPIRED, "reason": "Expired", "code": 410,
                })  # fmt: skip
            else:
                objects = self._snapshots[revision]
        else:
            revision, objects, start = self._revision, self.objects, ""
        keys = sorted(
            (_key(ns, name), (p, pl, ns, name)) for (p, pl, ns, name) in objects
            if (p, pl) == (prefix, plural) and namespace in (None, ns) and _key(ns, name) >= start
        )
        items, last, more = [], "", False
        for key, stored in keys:
            if limit and len(items) >= limit:
                more = True
                break
            obj, last = objects[stored], key
            if _matches(obj["metadata"].get("labels") or {}, selector) and _fields_match(obj, fields):
                items.append(copy.deepcopy(obj))
        self.listed.append((path, tuple(_key(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in items)))
        paths = {**KINDS, **{k.name: (f"apis/{k.api_version}", k.plural) for k in kinds.all_kinds()}}
        kind = next((k for k, v in paths.items() if v == (prefix, plural)), plural.title())
        metadata = {"resourceVersion": str(revision)}
        if more:
            if objects is self.objects:
                self._snapshots[revision] = dict(self.objects)  # a write replaces an object, never changes it
            metadata["continue"] = _continue_token(revision, last)
            if not selector and not fields:  # as the real server, which counts keys, not matches
                metadata["remainingItemCount"] = len(keys) - len(items)
            self._after_page(path)
        return 200, {
            "kind": f"{kind}List", "apiVersion": prefix.removeprefix("api/").removeprefix("apis/"),
            "metadata": metadata, "items": items,
        }, {}

    def _after_page(self, path: str) -> None:
        for pattern, action, left in list(self._between_pages):
            if pattern.search(path):
                left[0] -= 1
                if left[0] <= 0:
                    self._between_pages.remove((pattern, action, left))
                action()
                return

    def _watch(self, prefix, plural, namespace, query, selector):
        since = int(query.get("resourceVersion") or 0)
        if since and since < self._compacted:
            raise ApiError(410, f"too old resource version: {since} ({self._compacted})", "Expired")
        events = [
            {"type": kind, "object": copy.deepcopy(obj)} for rv, kind, key, obj in self._events
            if rv > since and key[:2] == (prefix, plural) and namespace in (None, key[2])
            and _matches(obj["metadata"].get("labels") or {}, selector)
        ]
        return 200, events, {"X-Watch": "1"}


def _handler(server: FakeApiServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as urllib3 pools connections

        def setup(self):
            super().setup()
            # Headers and body go out in two writes; without this, Nagle's
            # algorithm holds the body for the client's delayed ACK (~40 ms).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _respond(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            code, payload, extra = server.answer(self.command, self.path, self.headers, body)
            if code == DROP:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if isinstance(payload, LogBody):  # a pod's log, sent as it is made
                self._send_log(code, payload)
                return
            content_type = "application/json"
            if extra.pop("X-Watch", None):  # a watch streams one JSON event per line
                data = b"".join(json.dumps(event).encode() + b"\n" for event in payload)
            else:
                data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for header, value in extra.items():
                self.send_header(header, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_log(self, code: int, body: LogBody):
            """The log in chunks of the chunked transfer coding, as the API server streams the kubelet's answer;
            cut off without its last chunk when the body says so."""
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            for piece in body.pieces:
                if body.cut_after is not None and sent + len(piece) >= body.cut_after:
                    piece = piece[: body.cut_after - sent]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if piece else b"")
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                except (BrokenPipeError, ConnectionResetError):  # the reader stopped reading: a download cut short
                    self.close_connection = True
                    return
                sent += len(piece)
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _respond

        def log_message(self, *args):  # keep pytest output quiet
            pass

    return Handler
