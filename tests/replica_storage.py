"""The store several in-process replicas (`App`s) share in a test: the one SQLite file their
common data folder holds, or one PostgreSQL database of the throwaway test cluster."""

from __future__ import annotations

import pytest

# The PostgreSQL store is assembled from several branches; "postgres" joins this list when
# they are merged (the lead's merge), so these tests run on both stores from then on.
STORES = ["sqlite"]


def storage_lines(request: pytest.FixtureRequest) -> str:
    """The `[storage]` lines for `request.param` (one of STORES); none for SQLite."""
    if request.param == "postgres":
        return f'url = "{request.getfixturevalue("pg_url")}"\n'
    return ""
