"""YAML read safely, for every path that takes it (the page's import, the API, the `submit` command).

No custom tags, no aliases (the "billion laughs" expansion), a size limit, and a nesting
limit checked on the text before parsing (PyYAML recurses once per level and slows down
with the square of flow nesting), then counted exactly as the document composes. Every
problem is a SpecError under "yaml".

A JSON text is read as JSON, within the same limits: PyYAML reads YAML 1.1, which is no
superset of JSON (a tab before a key, as `jq --tab` and Go's MarshalIndent with "\t" write
it, is an error, and 36e2 or 1e+16 is a string).
"""

from __future__ import annotations

import json

import yaml

from jobs.spec import SpecError
from tenants.inputs import MAX_DEPTH, MAX_YAML_BYTES, json_depth_problem, yaml_depth_problem


class _TooDeep(yaml.YAMLError):
    pass


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without aliases, and with the nesting limit counted as it composes.

    The check on the text (yaml_depth_problem) catches a deep document in
    milliseconds but may be misled by quotes in plain scalars; this count is
    exact, and events are read lazily, so composing stops at the limit.
    """

    depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "YAML aliases are not accepted", event.start_mark)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:  # the document's root is a node too
                raise _TooDeep(f"The YAML nests deeper than {MAX_DEPTH} levels; a job spec or manifest needs about fifteen.")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(text: str) -> object:
    """The parsed document; raises SpecError for oversized or malformed YAML."""
    if len(text.encode()) > MAX_YAML_BYTES:
        raise SpecError({"yaml": [f"The YAML is larger than {MAX_YAML_BYTES // 1024} KiB."]})
    problem = yaml_depth_problem(text)
    if problem:
        raise SpecError({"yaml": [problem]})
    document = _json_document(text)
    if document is not _NOT_JSON:
        return document
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_NoAliasLoader) if doc is not None]
    except _TooDeep as error:
        raise SpecError({"yaml": [str(error)]}) from None
    except yaml.YAMLError as error:
        raise SpecError({"yaml": [_yaml_problem(error)]}) from None
    if len(documents) != 1:
        raise SpecError({"yaml": [f"Expected one YAML document, got {len(documents)}."]})
    return documents[0]


_NOT_JSON = object()


def _json_document(text: str) -> object:
    """The document when `text` is one JSON object or array, else _NOT_JSON (then read as YAML, which
    says what is wrong with it). NaN and the infinities are not JSON, as DRF's JSON parser holds."""
    if not text.lstrip().startswith(("{", "[")) or json_depth_problem(text):
        return _NOT_JSON  # too deep for json's recursion: the YAML composer counts it exactly and refuses it
    try:
        return json.loads(text, parse_constant=_not_json)
    except ValueError:
        return _NOT_JSON


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")


def _yaml_problem(error: yaml.YAMLError) -> str:
    """The parser's complaint with where it is: "Not valid YAML at line 3, column 7: mapping values are not allowed here"."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if mark is None:
        return f"Not valid YAML: {problem}"
    return f"Not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
