"""Which literal IP addresses gitreg refuses to connect to.

Git remotes, forge download URLs and mirror upstream URLs must not point at
link-local addresses (cloud metadata services such as 169.254.169.254),
multicast or the unspecified address. The check has to read a host the way
the C resolver does: `getaddrinfo` accepts `2852039166`, `0xa9fea9fe`,
`0251.0376.0251.0376` and `169.254.43518` for 169.254.169.254, and an
IPv4-mapped IPv6 address (`::ffff:169.254.169.254`) reaches the IPv4 host.
Names are not resolved here (DNS can change after the check; docs/security.md).
"""

from __future__ import annotations

import ipaddress
import socket

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def literal_address(host: str) -> Address | None:
    """The address `host` names literally, in any form the resolver accepts; None for a name."""
    text = host.strip().strip("[]").split("%", 1)[0]  # brackets, IPv6 zone id
    if not text:
        return None
    try:
        address: Address = ipaddress.ip_address(text)
    except ValueError:
        try:
            # inet_aton takes the legacy forms: one to four parts, decimal, octal or hex.
            address = ipaddress.IPv4Address(socket.inet_aton(text))
        except (OSError, ValueError):  # not an address; ValueError: NUL, surrogates
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def refused_address(host: str) -> Address | None:
    """The literal address of `host` if gitreg must not connect to it, else None."""
    address = literal_address(host)
    if address is None:
        return None
    if address.is_link_local or address.is_multicast or address.is_unspecified:
        return address
    return None
