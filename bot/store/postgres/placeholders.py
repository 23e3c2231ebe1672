"""SQL both stores share is written with SQLite's `?` placeholders; PostgreSQL numbers
them ($1, $2, …)."""

from __future__ import annotations

import itertools
import re


def numbered(sql: str) -> str:
    """`sql` with each `?` replaced by the next $n (the shared SQL has no `?` in literals)."""
    count = itertools.count(1)
    return re.sub(r"\?", lambda _: f"${next(count)}", sql)


def rowcount(status: str) -> int:
    """The rows a statement touched, from asyncpg's status string ("UPDATE 3")."""
    return int(status.rsplit(" ", 1)[-1])
