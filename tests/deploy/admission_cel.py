"""The admission policy evaluated as the API server evaluates a ValidatingAdmissionPolicy, with cel-python.

Its expressions are read from the manifest as written, never copied. The API server's steps are kept:
the request must match a resource rule (its resource, or `resource/subresource`, and its operation), every
match condition must be true, variables are evaluated in order and reached as `variables.<name>`, then each
validation must be true; one false, or failing to evaluate (the policy's failurePolicy is Fail), denies the
request with its `messageExpression` rendered (else its `message`). `object` and `oldObject` are the objects
as JSON (null where the operation has none), `request` the AdmissionRequest as JSON, its empty fields left
out, as the API server hands them to CEL.

cel-python departs from CEL in one place the policy relies on: `!=` between a map and null has no overload
there, where CEL's heterogeneous equality (cel-go, the API server's) answers true. `_ne` is that one shim.
Everything else (`has()`, `in`, `all()`, the ternary, string concatenation, errors absorbed by `||` and `&&`)
is the library's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError, bool_ne

from tests.deploy.manifests import by_kind, source_objects

POLICY_NAME = "gangway-queue-required"
GANGWAY = "system:serviceaccount:gangway:gangway-scheduler"


def _ne(left, right):
    """CEL's `!=` with null on either side: true unless both are null (cel-python has no map != null)."""
    if left is None or right is None:
        return celtypes.BoolType(not (left is None and right is None))
    return bool_ne(left, right)


FUNCTIONS = {"_!=_": _ne}


@dataclass(frozen=True)
class Verdict:
    """What the API server answers: `matched` False when the policy does not apply to the request (not a
    resource or operation it covers, or a match condition false); `denials` the messages of the
    validations that failed, empty when it is allowed."""

    matched: bool
    denials: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.denials


class PolicyError(AssertionError):
    """An expression of the policy that does not parse, or a message that does not render."""


@cache
def policy() -> dict:
    return by_kind(source_objects(), "ValidatingAdmissionPolicy")[POLICY_NAME]


_ENV = celpy.Environment()


@cache
def program(expression: str):
    """The parsed expression, ready to evaluate; a PolicyError when it does not parse."""
    try:
        return _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)
    except celpy.CELParseError as error:
        raise PolicyError(f"the policy's expression does not parse: {expression!r}: {error}") from error


def expressions(spec: dict | None = None) -> list[str]:
    """Every CEL expression of the policy: match conditions, variables, validations and their messages."""
    spec = spec or policy()["spec"]
    found = [item["expression"] for key in ("matchConditions", "variables", "validations")
             for item in spec.get(key, ())]  # fmt: skip
    return found + [item["messageExpression"] for item in spec["validations"] if "messageExpression" in item]


def evaluate(expression: str, activation: dict):
    """The value of one expression (a CELEvalError when it fails, as cel-go returns an error)."""
    try:
        return program(expression).evaluate(activation)
    except CELEvalError as error:
        return error


def request(*, operation: str, obj: dict | None, old: dict | None = None, user: str = "alice",
            resource: tuple[str, str] | None = None, subresource: str = "") -> dict:  # fmt: skip
    """An AdmissionRequest as the API server builds it for a namespaced object: its kind is the object's (a
    Scale's for /scale), its resource (group, plural) read from the object unless given; empty fields are left
    out."""
    source = obj if obj is not None else old
    meta = source.get("metadata", {})
    group, _, version = source["apiVersion"].rpartition("/")
    resource = resource or (group, source["kind"].lower() + "s")
    req = {
        "uid": "0", "operation": operation, "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
        "kind": {"group": group, "version": version, "kind": source["kind"]},
        "resource": {"group": resource[0], "version": "v1", "resource": resource[1]},
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
    }  # fmt: skip
    if subresource:
        req["subResource"] = subresource
    return req


def _matches(spec: dict, req: dict) -> bool:
    """Whether a resource rule of the policy covers the request's resource and operation."""
    resource = req["resource"]["resource"] + (f"/{req['subResource']}" if req.get("subResource") else "")
    return any(
        req["resource"]["group"] in rule["apiGroups"] and resource in rule["resources"]
        and req["operation"] in rule["operations"]
        for rule in spec["matchConstraints"]["resourceRules"]
    )  # fmt: skip


def review(req: dict, obj: dict | None, old: dict | None = None, spec: dict | None = None) -> Verdict:
    """The policy's verdict on one request (`spec`: the policy's spec, the manifest's unless given)."""
    spec = spec or policy()["spec"]
    if not _matches(spec, req):
        return Verdict(matched=False)
    activation = {"request": celpy.json_to_cel(req), "object": celpy.json_to_cel(obj),
                  "oldObject": celpy.json_to_cel(old)}  # fmt: skip
    for condition in spec.get("matchConditions", ()):
        value = evaluate(condition["expression"], activation)
        if isinstance(value, CELEvalError):
            return Verdict(matched=True, denials=(f"match condition {condition['name']} failed: {value}",))
        if value is not True and value != celtypes.BoolType(True):
            return Verdict(matched=False)
    variables: dict = {}
    for variable in spec.get("variables", ()):
        activation["variables"] = celtypes.MapType(variables)
        # An error is kept as the variable's value: it denies only a validation whose result depends on it.
        variables[celtypes.StringType(variable["name"])] = evaluate(variable["expression"], activation)
    activation["variables"] = celtypes.MapType(variables)
    denials = []
    for validation in spec["validations"]:
        value = evaluate(validation["expression"], activation)
        if isinstance(value, CELEvalError):
            denials.append(f"expression failed: {validation['expression']!r}: {value}")
        elif value != celtypes.BoolType(True):
            denials.append(_message(validation, activation))
    return Verdict(matched=True, denials=tuple(denials))


def _message(validation: dict, activation: dict) -> str:
    if "messageExpression" not in validation:
        return validation["message"]
    message = evaluate(validation["messageExpression"], activation)
    if not isinstance(message, str):
        raise PolicyError(f"the message of {validation['expression']!r} does not render: {message}")
    return str(message)
