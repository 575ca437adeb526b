"""Request bodies of the API: JSON with a nesting limit, YAML parsers, and a manifest turned into the job spec."""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import BaseParser, JSONParser

from jobs.spec import SpecError
from jobs import kinds
from jobs.safe_yaml import load_yaml
from jobs.yaml_import import is_manifest, spec_from_manifest
from tenants.inputs import MAX_YAML_BYTES, json_depth_problem


class JsonParser(JSONParser):
    """DRF's JSON parser, after a check on the text: a body nested deeper than the limit is a 400 naming it.

    Python's json module recurses once per level; about a thousand levels raise
    RecursionError, which DRF does not catch. The check costs a regex pass.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) if stream is not None else b""
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError(f"The JSON body is not {encoding}.") from None
        problem = json_depth_problem(text)
        if problem:
            raise ParseError(problem)
        return super().parse(io.BytesIO(raw), media_type, parser_context)


class YamlParser(BaseParser):
    """A YAML body, parsed safely (no tags, no aliases, size-limited) by `jobs.safe_yaml.load_yaml`."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read(MAX_YAML_BYTES + 1) if stream is not None else b""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("The YAML body is not UTF-8.") from None
        try:
            return load_yaml(text)
        except SpecError as error:
            raise ParseError(" ".join(error.errors.get("yaml", [str(error)]))) from None


class XYamlParser(YamlParser):
    media_type = "application/x-yaml"


class TextYamlParser(YamlParser):
    media_type = "text/yaml"


YAML_PARSERS = (YamlParser, XYamlParser, TextYamlParser)


def spec_data_from_document(data: object) -> tuple[object, list[str]]:
    """(spec data, unsupported fields): a manifest converted, anything else as it came.

    Raises ValidationError for a manifest whose shape Gangway cannot read.
    """
    if not is_manifest(data):
        return data, []
    try:
        return spec_from_manifest(data)
    except SpecError as error:
        raise ValidationError(error.errors) from None
    except (AttributeError, TypeError, ValueError) as error:
        # spec_from_manifest trusts the manifest's nesting (mappings where the CRD has mappings).
        raise ValidationError(
            {"manifest": [f"Not a {data['kind']} Gangway can read: {error}. Compare with "
                          f"{kinds.get(data['kind']).api_version}."]}
        ) from None
