"""Streaming compressors producing standard gzip / bzip2 streams.

gzip uses python-isal (about 10x zlib's speed; the output is ordinary gzip that Python's ``gzip``,
zcat, Spark and Java's GZIPInputStream read). Confluent's ``s3.compression.level`` is a zlib level
-1..9; ISA-L has levels 0..3, so levels map to the ISA-L level of similar ratio:

=========  ====================================================
zlib level  what we use
=========  ====================================================
-1 (dflt)   ISA-L 1 (ratio close to zlib 6, Confluent's default)
0           zlib 0 (stored, no compression: what 0 asks for)
1-3         ISA-L 0
4-6         ISA-L 1
7-8         ISA-L 2
9           ISA-L 3
=========  ====================================================
"""
from __future__ import annotations

import bz2
import zlib
from typing import Protocol

from isal import isal_zlib

from lakesink.errors import InvalidArgumentError

GZIP_WBITS = 31  # deflate wrapped in a gzip header/trailer


class Compressor(Protocol):
    def compress(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...


def isal_level(level: int) -> int | None:
    """The ISA-L level for a zlib level (-1..9); None means "use zlib level 0 (stored)"."""
    if not -1 <= level <= 9:
        raise InvalidArgumentError(f"compression level {level} is outside -1..9")
    if level == -1:
        return 1
    if level == 0:
        return None
    return 0 if level <= 3 else 1 if level <= 6 else 2 if level <= 8 else 3


def gzip_compressor(level: int = -1) -> Compressor:
    """A compressor whose output (compress()* + flush()) is ONE standard gzip member."""
    il = isal_level(level)
    if il is None:
        return zlib.compressobj(0, zlib.DEFLATED, GZIP_WBITS)
    return isal_zlib.compressobj(il, isal_zlib.DEFLATED, GZIP_WBITS)


def bzip2_compressor(level: int = -1) -> Compressor:
    """A compressor producing one bzip2 stream (level -1 -> 9, bzip2's default)."""
    if not -1 <= level <= 9:
        raise InvalidArgumentError(f"compression level {level} is outside -1..9")
    return bz2.BZ2Compressor(9 if level in (-1, 0) else level)


COMPRESSORS = {"gzip": gzip_compressor, "bzip2": bzip2_compressor}


def new_compressor(kind: str, level: int = -1) -> Compressor:
    """``kind`` is ``gzip`` or ``bzip2``."""
    try:
        return COMPRESSORS[kind](level)
    except KeyError:
        raise InvalidArgumentError(f"unknown compression {kind!r}; expected one of {sorted(COMPRESSORS)}") from None


class CompressingSink:
    """write()/finish() over a sink: everything written between construction and finish() becomes
    one compressed stream (one gzip member / bzip2 stream), pushed to ``sink`` as it is produced."""

    def __init__(self, sink, kind: str = "gzip", level: int = -1):
        self._sink = sink
        self._c = new_compressor(kind, level)
        self.raw_bytes = 0

    def write(self, data: bytes) -> None:
        self.raw_bytes += len(data)
        out = self._c.compress(data)
        if out:
            self._sink.write(out)

    def finish(self) -> None:
        out = self._c.flush()
        if out:
            self._sink.write(out)


def parse_compression(value: str | None, allowed=("none", "gzip")) -> str:
    """Normalise a ``compression`` option (None/'' -> 'none')."""
    v = (value or "none").lower()
    if v not in allowed:
        raise InvalidArgumentError(f"compression {value!r} not supported here; expected one of {list(allowed)}")
    return v
