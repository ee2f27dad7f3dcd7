"""The Merkle tree of the log: RFC 6962/9162 hashing, the C2SP tlog-tiles
layout, and inclusion and consistency proofs built from tiles.

A leaf hash is SHA-256(0x00 || entry), an interior node SHA-256(0x01 || left
|| right). A hash tile of level L holds up to 256 consecutive hashes of tree
level 8*L, so a full level-L tile's hashes are the leaves of the subtree one
hash of level L+1 stands for. Tile indexes in paths are groups of three
digits, every group but the last prefixed with `x` (1234067: x001/x234/067);
a partial tile (fewer than 256 hashes) adds `.p/<width>`. Entry bundles
(`tile/entries/...`) hold each entry behind a two-byte big-endian length.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
HASH_SIZE = 32
MAX_ENTRY = 0xFFFF  # an entry bundle's length prefix is two bytes


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def tile_index_path(index: int) -> str:
    digits = f"{index:03d}"
    if len(digits) % 3:
        digits = "0" * (3 - len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*("x" + g for g in groups[:-1]), groups[-1]])


def parse_tile_index(parts: Sequence[str]) -> int | None:
    """The index of a tile path's groups, or None unless they are canonical."""
    if not parts:
        return None
    digits = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        group = part if last else part.removeprefix("x")
        if (not last and not part.startswith("x")) or len(group) != 3 or not group.isdigit():
            return None
        digits.append(group)
    index = int("".join(digits))
    return index if tile_index_path(index) == "/".join(parts) else None


def tile_path(level: int | str, index: int, width: int) -> str:
    """`tile/<L>/<N>[.p/<W>]`, with `entries` as the level of an entry bundle."""
    suffix = f".p/{width}" if width < TILE_WIDTH else ""
    return f"tile/{level}/{tile_index_path(index)}{suffix}"


def largest_power_below(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


class TreeReader:
    """Subtree hashes of a tree of `size` leaves, read from its hash tiles.

    `tile(level, index, width)` returns a tile's bytes (at least `width` hashes
    of that tile); hashes of aligned subtrees of 256^L leaves come straight
    from level L, the others are hashed together from the level below.
    """

    def __init__(self, size: int, tile: Callable[[int, int, int], bytes]) -> None:
        self.size = size
        self._tile = tile
        self._tiles: dict[tuple[int, int], bytes] = {}

    def _stored(self, level: int, index: int) -> bytes:
        """Hash `index` of tile level `level` (tree level 8*level)."""
        tile_index, offset = divmod(index, TILE_WIDTH)
        span = TILE_WIDTH ** (level + 1)
        width = min(TILE_WIDTH, (self.size - tile_index * span) // (span // TILE_WIDTH))
        key = (level, tile_index)
        data = self._tiles.get(key)
        if data is None or len(data) < width * HASH_SIZE:
            data = self._tile(level, tile_index, width)
            if len(data) < width * HASH_SIZE:
                raise ValueError(f"tile {tile_path(level, tile_index, width)} is short")
            self._tiles[key] = data
        return data[offset * HASH_SIZE : (offset + 1) * HASH_SIZE]

    def subtree(self, start: int, end: int) -> bytes:
        """MTH of leaves [start, end): the RFC 6962 split at the largest power
        of two, with complete aligned subtrees read from tiles."""
        n = end - start
        if n <= 0 or end > self.size:
            raise ValueError(f"no subtree [{start}, {end}) in a tree of {self.size}")
        if n & (n - 1) == 0 and start % n == 0:
            height = n.bit_length() - 1
            if height % TILE_HEIGHT == 0:
                return self._stored(height // TILE_HEIGHT, start // n)
        if n == 1:
            return self._stored(0, start)
        k = largest_power_below(n)
        return node_hash(self.subtree(start, start + k), self.subtree(start + k, end))

    def root(self) -> bytes:
        if self.size == 0:
            return hashlib.sha256(b"").digest()
        return self.subtree(0, self.size)

    def inclusion_proof(self, index: int) -> list[bytes]:
        """RFC 6962 PATH(index, D[0:size])."""
        if not 0 <= index < self.size:
            raise ValueError(f"no entry {index} in a tree of {self.size}")
        proof: list[bytes] = []
        start, end, m = 0, self.size, index
        while end - start > 1:
            k = largest_power_below(end - start)
            if m < k:
                proof.append(self.subtree(start + k, end))
                end = start + k
            else:
                proof.append(self.subtree(start, start + k))
                start, m = start + k, m - k
        proof.reverse()
        return proof

    def consistency_proof(self, old_size: int) -> list[bytes]:
        """RFC 6962 PROOF(old_size, D[0:size])."""
        if not 0 < old_size <= self.size:
            raise ValueError(f"no consistency from {old_size} to {self.size}")
        proof: list[bytes] = []
        start, end, m, complete = 0, self.size, old_size, True
        while m != end - start:
            k = largest_power_below(end - start)
            if m <= k:
                proof.append(self.subtree(start + k, end))
                end = start + k
            else:
                proof.append(self.subtree(start, start + k))
                start, m, complete = start + k, m - k, False
        if not complete:
            proof.append(self.subtree(start, end))
        proof.reverse()
        return proof


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, size: int, old_root: bytes, root: bytes, proof: list[bytes]
) -> bool:
    """RFC 9162 section 2.1.4.2."""
    if old_size > size or old_size == 0:
        return False
    if old_size == size:
        return not proof and old_root == root
    if old_size & (old_size - 1) == 0:
        proof = [old_root, *proof]
    if not proof:
        return False
    fn, sn = old_size - 1, size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == root
