"""Reading deploy/Dockerfile and .dockerignore without a Docker engine."""

from __future__ import annotations

import fnmatch
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, arguments)

    def copies(self) -> list[tuple[list[str], str]]:
        """Returns (sources, destination) of each COPY from the build context (not from another stage)."""
        result = []
        for instruction, arguments in self.instructions:
            words = shlex.split(arguments)
            if instruction == "COPY" and not any(w.startswith("--from=") for w in words):
                words = [w for w in words if not w.startswith("--")]
                result.append((words[:-1], words[-1]))
        return result

    def values(self, instruction: str) -> list[str]:
        return [arguments for name, arguments in self.instructions if name == instruction]


def stages(path: Path) -> list[Stage]:
    """Returns the Dockerfile's stages in order, continuation lines joined and comments dropped."""
    lines, current = [], ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        current += stripped.removesuffix("\\").strip() + " " if stripped.endswith("\\") else stripped
        if not stripped.endswith("\\"):
            lines.append(current)
            current = ""
    result: list[Stage] = []
    for line in lines:
        instruction, _, arguments = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            words = arguments.split()
            result.append(Stage(name=words[-1] if "AS" in (w.upper() for w in words) else "", base=words[0]))
        else:
            result[-1].instructions.append((instruction, arguments.strip()))
    return result


def ignored(path: str, patterns: list[str]) -> bool:
    """Returns whether .dockerignore patterns leave `path` (relative to the context) out of the build."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(prefix, pattern.strip("/")) or fnmatch.fnmatch(prefix, pattern.removeprefix("**/"))
        for pattern in patterns
        for prefix in prefixes
    )


def ignore_patterns(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
