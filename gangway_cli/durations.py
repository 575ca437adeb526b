"""Times said as the pages say them: the portal's `core.durations`. The CLI's own wheel carries
`core` as `gangway_cli.shared_core` (gangway_cli/pyproject.toml), so that it adds no top-level
`core` to the environment it is installed in; a checkout of the portal, or the portal's own
package, has `core` itself."""

from __future__ import annotations

try:
    from gangway_cli.shared_core.durations import duration
except ModuleNotFoundError:  # the portal's checkout or package: its own `core`
    from core.durations import duration

__all__ = ["duration"]
