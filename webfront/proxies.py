"""Who the client is: the peer address, or what a trusted reverse proxy says it is.

Forwarding headers are believed only from a peer in ``TRUSTED_PROXIES``
(addresses or CIDR blocks). From such a peer the client is the rightmost
address of ``Forwarded``/``X-Forwarded-For`` (or ``X-Real-IP``) that is not
itself a trusted proxy: entries left of it were written by the client and are
never believed. From any other peer the headers are ignored for the address,
and their mere presence makes the request non-local: a local proxy that relays
the internet must not make the internet look local (``/metrics``).
Rate limits and the ``/metrics`` check both ask ``client(request)``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDictProxy

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Every header a proxy or CDN uses to name the client: with none trusted, any of them
# makes a request non-local.
FORWARDING_HEADERS = (
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded",
    "Forwarded-For",
    "X-Real-IP",
    "X-Client-IP",
    "True-Client-IP",
    "CF-Connecting-IP",
    "X-Cluster-Client-IP",
    "Fastly-Client-IP",
)
_FORWARDED_FOR = re.compile(r'(?i)(?:^|[;,\s])for=("?)([^;,"]*)\1')


@dataclass(frozen=True)
class Client:
    address: str  # the client's address as text (rate limits hash it)
    local: bool  # on this machine's loopback, and not relaying anyone else


def parse_networks(text: str) -> tuple[Network, ...]:
    """``"10.0.0.1, 192.168.0.0/16"`` -> networks; ValueError naming a bad entry's position."""
    networks = []
    for i, part in enumerate(p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"entry {i + 1} is not an address or CIDR block") from None
    return tuple(networks)


def _ip(text: str) -> Address | None:
    text = text.strip()
    if text.startswith("["):  # Forwarded: "[2001:db8::1]:4711"
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:  # "192.0.2.1:4711"
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


class ClientResolver:
    def __init__(self, trusted: Sequence[Network] = ()) -> None:
        self._trusted = tuple(trusted)

    def _is_trusted(self, ip: Address | None) -> bool:
        return ip is not None and any(ip in net for net in self._trusted)

    def client(self, request: web.Request) -> Client:
        headers = request.headers
        peer_text = request.remote or ""
        peer = _ip(peer_text)
        forwarded = any(name in headers for name in FORWARDING_HEADERS)
        if not self._is_trusted(peer):
            local = peer is not None and peer.is_loopback and not forwarded
            return Client(str(peer) if peer is not None else peer_text or "unknown", local)
        chain = self._chain(headers)
        if not chain:  # a trusted proxy that does not say for whom: not local
            return Client(str(peer), False)
        for entry in reversed(chain):
            ip = _ip(entry)
            if not self._is_trusted(ip):
                if ip is None:  # the proxy wrote something else: limit it as it is
                    return Client(entry.strip()[:64] or "unknown", False)
                return Client(str(ip), ip.is_loopback)
        first = _ip(chain[0])  # every hop is a trusted proxy: the first one is the client
        return Client(str(first), first is not None and first.is_loopback)

    @staticmethod
    def _chain(headers: CIMultiDictProxy[str]) -> list[str]:
        get = headers.getall
        forwarded = get("Forwarded", [])
        if forwarded:
            return [m.group(2) for value in forwarded for m in _FORWARDED_FOR.finditer(value)]
        xff = get("X-Forwarded-For", [])
        if xff:
            return [part for value in xff for part in value.split(",") if part.strip()]
        real = headers.get("X-Real-IP")
        return [real] if real else []
