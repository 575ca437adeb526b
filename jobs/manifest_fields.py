"""Walking a manifest: each part read as a mapping, and every key not read listed back.

A manifest's fields are never silently dropped: each reader names the keys it reads at
a path, and every other key there goes into the import's list of unsupported fields.
"""

from __future__ import annotations

from jobs.spec import SpecError


def as_mapping(value: object, path: str) -> dict:
    """`value` as a mapping ({} when absent); raises SpecError naming `path` when it is something else."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError({path: [f"Must be a mapping, got {type(value).__name__}."]})
    return value


def as_name(value: object, path: str) -> str | None:
    """`value` as a name (None when absent); raises SpecError naming `path` when it is not a string."""
    if value is None or isinstance(value, str):
        return value
    raise SpecError({path: [f"Must be a string, got {type(value).__name__}."]})


def list_unsupported(found: list[str], path: str, data: object, known: set[str]) -> None:
    """Adds to `found` the path of every key of `data` not in `known` ("" is the top level)."""
    if isinstance(data, dict):
        found.extend(f"{path}.{key}" if path else str(key) for key in data if key not in known)
