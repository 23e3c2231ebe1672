"""Session leases in SQLite: one row per session key naming the process whose turn runs
there and until when. Claiming is one conditional upsert, so two processes (or, later,
replicas on PostgreSQL running the same statement) can never both hold a key."""

from __future__ import annotations

from bot.store.sqlite.connection import Connection

# Taken when the key is free, already ours (a renewal) or held by a holder whose time ran
# out (it died, or stalled past its lease): the WHERE makes the conflicting update a no-op.
_CLAIM = (
    "INSERT INTO session_leases(session_key, holder, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT(session_key) DO UPDATE SET holder = excluded.holder,"
    " expires_at = excluded.expires_at"
    " WHERE session_leases.holder = excluded.holder OR session_leases.expires_at <= ?"
)


class LeaseTables(Connection):
    async def claim_lease(self, session_key: str, holder: str, until: float, now: float) -> bool:
        """Hold `session_key` for `holder` until `until`, if it is free, ours or expired at
        `now`; returns whether `holder` holds it now. Renewing is claiming again."""
        async with self.transaction() as db:
            cur = await db.execute(_CLAIM, (session_key, holder, until, now))
            return cur.rowcount == 1

    async def release_lease(self, session_key: str, holder: str) -> None:
        """Give `session_key` up, if `holder` still holds it."""
        async with self.transaction() as db:
            await db.execute(
                "DELETE FROM session_leases WHERE session_key = ? AND holder = ?",
                (session_key, holder),
            )

    async def lease_holder(self, session_key: str, now: float) -> str | None:
        """Who holds `session_key` at `now` (None: nobody, or only an expired holder)."""
        row = await self._fetchone(
            "SELECT holder FROM session_leases WHERE session_key = ? AND expires_at > ?",
            (session_key, now),
        )
        return str(row[0]) if row else None

    async def lease_holders(self) -> list[str]:
        """Every holder named on a lease row, expired or not."""
        rows = await self._fetchall("SELECT DISTINCT holder FROM session_leases")
        return [str(row[0]) for row in rows]

    async def release_leases_of(self, holder: str) -> None:
        """Give up every lease of `holder` (a process known to be gone)."""
        async with self.transaction() as db:
            await db.execute("DELETE FROM session_leases WHERE holder = ?", (holder,))
