"""Who sent a request and whether it came over HTTPS, when a reverse proxy may stand in
between: `X-Forwarded-For` and `X-Forwarded-Proto` are believed only from a peer listed in
`server.trusted_proxies`, since anyone else can write those headers too.

The address is what the wrong-token limits count per client; the scheme decides whether
the console's login cookie is `Secure`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Client:
    address: str  # the client's IP address as Krill believes it ("unknown" without one)
    https: bool  # the person's browser used HTTPS (directly, or to a trusted proxy)


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_of(
    peer: str | None,
    headers: Mapping[str, str],
    networks: Sequence[Network],
    *,
    direct_tls: bool = False,
) -> Client:
    """The client behind `peer` (the socket's remote address). From a trusted proxy, the
    address is the right-most `X-Forwarded-For` entry that is not itself a trusted proxy
    (entries further left are whatever the client wrote), and HTTPS is the right-most
    `X-Forwarded-Proto` value: the one the proxy in front of Krill set."""
    address = peer or "unknown"
    if not _trusted(address, networks):
        return Client(address, direct_tls)
    hops = [h.strip() for h in headers.get("X-Forwarded-For", "").split(",") if h.strip()]
    for hop in reversed(hops):
        address = hop
        if not _trusted(hop, networks):
            break
    schemes = [s.strip().lower() for s in headers.get("X-Forwarded-Proto", "").split(",")]
    https = direct_tls or schemes[-1] == "https"
    return Client(address, https)
