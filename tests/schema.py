"""A store's schema as a set of plain lines, read from the database itself (SQLite's
pragmas, PostgreSQL's information_schema and catalogs) and normalised so that the two
stores' lines compare: column types by family (integer, real, text; a PostgreSQL boolean
is an integer, as SQLite keeps it), a primary key column counts as NOT NULL, and an index
is named only where a migration created it by name (the ones behind PRIMARY KEY and UNIQUE
constraints are listed as those constraints). `skip` names what a dialect's full-text
search owns: tables (and their shadow tables, by prefix), or "table.column", or an index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

import asyncpg

FAMILIES = {
    "integer": "integer",
    "bigint": "integer",
    "smallint": "integer",
    "boolean": "integer",
    "real": "real",
    "double precision": "real",
    "text": "text",
}


def _line(kind: str, table: str, what: str) -> str:
    return f"{table}: {kind} {what}"


def _skipped(name: str, skip: Iterable[str]) -> bool:
    return any(name == s or name.startswith(f"{s}_") for s in skip)


def sqlite_schema(path: Path, skip: Iterable[str] = ()) -> set[str]:
    db = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
            if not _skipped(name, skip)
        ]
        lines: set[str] = set()
        for table in tables:
            for _, column, type_, notnull, _, pk in db.execute(f'PRAGMA table_info("{table}")'):
                if f"{table}.{column}" in skip:
                    continue
                null = "not null" if notnull or pk else "null"
                lines.add(_line("column", table, f"{column} {FAMILIES[type_.lower()]} {null}"))
            keys = [
                column
                for _, column, *_, pk in sorted(
                    db.execute(f'PRAGMA table_info("{table}")'), key=lambda r: r[5]
                )
                if pk
            ]
            if keys:
                lines.add(_line("primary key", table, f"({', '.join(keys)})"))
            for _, name, unique, origin, partial in db.execute(f'PRAGMA index_list("{table}")'):
                if name in skip or origin == "pk":
                    continue
                columns = ", ".join(c for *_, c in db.execute(f'PRAGMA index_info("{name}")'))
                if origin == "u":
                    lines.add(_line("unique", table, f"({columns})"))
                else:
                    lines.add(_index(table, name, columns, unique, partial))
        return lines
    finally:
        db.close()


def _index(table: str, name: str, columns: str, unique: bool, partial: bool) -> str:
    kind = "unique index" if unique else "index"
    return _line(kind, table, f"{name} ({columns})" + (" partial" if partial else ""))


_PG_INDEXES = """
SELECT t.relname AS table, i.relname AS name, ix.indisunique AS unique,
       ix.indisprimary AS primary, ix.indpred IS NOT NULL AS partial,
       EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid) AS constraint,
       ARRAY(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
             ORDER BY k.n) AS columns
FROM pg_index ix
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = current_schema()
"""


async def postgres_schema(url: str, skip: Iterable[str] = ()) -> set[str]:
    db = await asyncpg.connect(url)
    try:
        columns = await db.fetch(
            "SELECT table_name, column_name, data_type, is_nullable FROM"
            " information_schema.columns WHERE table_schema = current_schema()"
        )
        lines: set[str] = set()
        for row in columns:
            table, column = row["table_name"], row["column_name"]
            if _skipped(table, skip) or f"{table}.{column}" in skip:
                continue
            null = "null" if row["is_nullable"] == "YES" else "not null"
            family = FAMILIES[row["data_type"]]
            lines.add(_line("column", table, f"{column} {family} {null}"))
        for row in await db.fetch(_PG_INDEXES):
            table, name = row["table"], row["name"]
            if _skipped(table, skip) or name in skip:
                continue
            names = ", ".join(row["columns"])
            if row["primary"]:
                lines.add(_line("primary key", table, f"({names})"))
            elif row["constraint"]:
                lines.add(_line("unique", table, f"({names})"))
            else:
                lines.add(_index(table, name, names, row["unique"], row["partial"]))
        return lines
    finally:
        await db.close()


def difference(sqlite: set[str], postgres: set[str]) -> str:
    """The lines only one store has, one per line ("" when the schemas agree)."""
    only = [f"only in SQLite:     {line}" for line in sorted(sqlite - postgres)]
    only += [f"only in PostgreSQL: {line}" for line in sorted(postgres - sqlite)]
    return "\n".join(only)
