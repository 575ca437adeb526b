"""Settings for bench.api_bench: the portal's, plus a URL for the floor endpoint."""

from portal.settings import *  # noqa: F403

ROOT_URLCONF = "bench.api_bench_urls"
