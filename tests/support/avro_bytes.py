"""Avro byte-level helpers the unit tests share: hand-made varints and random mutations of datums."""
from __future__ import annotations

import random


def zz(n: int) -> bytes:
    """Avro's zigzag varint of ``n``."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def mutate(datum: bytes, rng: random.Random) -> bytes:
    """``datum`` with one to three random byte changes, deletions or insertions."""
    d = bytearray(datum)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(3)
        if op == 0 and d:
            d[rng.randrange(len(d))] = rng.randrange(256)
        elif op == 1 and d:
            del d[rng.randrange(len(d))]
        else:
            d.insert(rng.randrange(len(d) + 1), rng.randrange(256))
    return bytes(d)
