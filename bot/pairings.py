"""An operator's view of pairing requests: the pending ones, and approving or denying one by
its code. `krill pairing` and the console both decide through here."""

from __future__ import annotations

from collections.abc import Iterable

from bot.sessions.access import PAIRING_TTL_SECONDS, normalize_code
from bot.store.base import Pairing, PairingStatus, PairingStore


def minutes_left(pairing: Pairing, now: float) -> int:
    return max(1, int(PAIRING_TTL_SECONDS - (now - pairing.created_at)) // 60)


async def pending_pairings(
    store: PairingStore, channels: Iterable[str], now: float
) -> list[Pairing]:
    """Requests still waiting for an operator, oldest first per channel (expired ones left out)."""
    return [
        p
        for channel in channels
        for p in await store.pairing_pending(channel)
        if now - p.created_at < PAIRING_TTL_SECONDS
    ]


async def decide_pairing(
    store: PairingStore, channel: str, code: str, *, approve: bool, now: float
) -> Pairing | None:
    """Approve or deny the pending request with `code` on `channel`; None when no pending
    request has that code (codes expire, and a denied one cannot be approved later)."""
    wanted = normalize_code(code)
    match = next(
        (p for p in await pending_pairings(store, [channel], now) if p.code == wanted), None
    )
    if match is None:
        return None
    if approve:
        match.status = PairingStatus.APPROVED
    else:
        # Kept as denied for the pairing TTL, so the person cannot ask again at once.
        match.status, match.created_at = PairingStatus.DENIED, now
    await store.pairing_put(match)
    return match
