"""Which destination partition a restored record goes to when the destination has another partition count (pure).

A restore keeps partition numbers unless told otherwise (:meth:`Router.same`). Into a topic with more or fewer
partitions it routes each record with a :class:`Router`, a frozen, picklable value the driver builds once per
destination topic and hands to every task:

* ``--partitioner default`` (:meth:`Router.default`): a record with a key goes where the Java producer's default
  partitioner puts it, ``toPositive(murmur2(key)) % numPartitions`` (:func:`default_partition`; the key is the
  bytes the restore produces, which is what a Java producer producing them would hash). Records of one key land in
  one destination partition whatever source partition they came from.
* ``--partition-map 0=3,1=3,2=0`` (:class:`PartitionMap`, :meth:`Router.mapped`): every record of a source
  partition goes to the partition the map names; a source partition the map leaves out is refused
  (:meth:`Router.check_sources`), never guessed.

Keyless records under ``--partitioner default`` keep their source partition number modulo the destination's
count (:data:`KEYLESS_RULE`). The Java producer's own rule for them (sticky batches, i.e. whichever partition a
batch happened to fill) is not reproducible: a restore must put every record where a rerun would put it, or a
resumed run's progress would describe records that are in another partition than it claims and exactly-once
is lost. This rule is a function of the record alone, keeps every keyless record of one source partition in
one destination partition in source order, and is the identity when the counts are equal.

:func:`murmur2` is a transcription of ``org.apache.kafka.common.utils.Utils.murmur2`` (MurmurHash2, 32 bit,
seed ``0x9747b28c``), checked against the real Java client's output for a few hundred keys and every count 1..100
(``tests/unit/fixtures/murmur2_java.json``). :func:`murmur2_array` / :func:`default_partitions` /
:meth:`Router.route_many` are the same on many keys at once (numpy, one pass per 4-byte block position over the
keys still that long): a restore routes a whole object's keys in one call. No Kafka client, no Spark here.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from lakesink.errors import InvalidArgumentError, RestoreRefusedError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["SEED", "KEYLESS_RULE", "PARTITIONERS", "murmur2", "to_positive", "default_partition", "murmur2_array",
           "default_partitions", "PartitionMap", "Router"]

#: Kafka's murmur2 seed (``Utils.murmur2``)
SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
#: what ``--partitioner default`` does with a record that has no key (a null key; an empty key is a key)
KEYLESS_RULE = "keyless records keep their source partition number modulo the destination's partition count"
#: the values ``--partitioner`` takes
PARTITIONERS = ("default",)


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)``: a signed 32-bit int, as Java returns it."""
    n = len(data)
    h = (SEED ^ n) & _MASK
    blocks = n >> 2
    if blocks:
        for k in struct.unpack_from(f"<{blocks}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rem = n & 3
    if rem:
        t = blocks << 2
        if rem == 3:
            h ^= data[t + 2] << 16
        if rem >= 2:
            h ^= data[t + 1] << 8
        h = ((h ^ data[t]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(h: int) -> int:
    """Kafka's ``Utils.toPositive``: the low 31 bits (not ``abs``: ``Integer.MIN_VALUE`` becomes 0)."""
    return h & 0x7FFFFFFF


def _check_count(num_partitions: int) -> None:
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise InvalidArgumentError(f"a partition count must be an integer >= 1, got {num_partitions!r}")


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner gives a record with ``key`` (bytes, not None) in a
    topic of ``num_partitions`` partitions: ``toPositive(murmur2(key)) % num_partitions``."""
    _check_count(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


def _flatten(keys: Any) -> tuple["np.ndarray", "np.ndarray", "np.ndarray", "np.ndarray | None"]:
    """``(data, starts, lengths, nulls)`` of many keys: a sequence of bytes-like or None, or a pyarrow
    binary/string array (chunked or not). ``nulls`` is None when no key is null; null keys have length 0."""
    import numpy as np

    if hasattr(keys, "combine_chunks"):  # a pyarrow ChunkedArray
        keys = keys.combine_chunks()
    if hasattr(keys, "buffers") and hasattr(keys, "type"):  # a pyarrow array: read its buffers, no copy per key
        import pyarrow as pa

        t = keys.type
        if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            off_type = np.int64
        elif pa.types.is_binary(t) or pa.types.is_string(t):
            off_type = np.int32
        else:
            raise InvalidArgumentError(f"keys must be binary or string, got an Arrow array of {t}")
        n = len(keys)
        _validity, offsets, data = keys.buffers()[:3]
        offs = np.frombuffer(offsets, dtype=off_type)[keys.offset:keys.offset + n + 1].astype(np.int64) \
            if offsets is not None and n else np.zeros(n + 1, np.int64)
        raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
        nulls = keys.is_null().to_numpy(zero_copy_only=False) if keys.null_count else None
        lengths = np.diff(offs)
        starts = offs[:-1].copy()
        if nulls is not None:
            lengths[nulls] = 0
        return raw, starts, lengths, nulls
    if not isinstance(keys, Sequence):
        keys = list(keys)
    n = len(keys)
    nulls = None
    if any(k is None for k in keys):
        nulls = np.fromiter((k is None for k in keys), dtype=bool, count=n)
        keys = [b"" if k is None else k for k in keys]
    try:
        joined = b"".join(keys)
    except TypeError:
        bad = next(i for i, k in enumerate(keys) if not isinstance(k, (bytes, bytearray, memoryview)))
        raise InvalidArgumentError(f"key {bad} is {type(keys[bad]).__name__}, not bytes") from None
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return np.frombuffer(joined, dtype=np.uint8), starts, lengths, nulls


#: keys hashed per numpy pass: bounds the scratch memory (about four times the bytes of these keys)
CHUNK_KEYS = 1 << 18
_TAIL_MASKS = (0, 0xFF, 0xFFFF, 0xFFFFFF)


def _murmur2_flat(data: "np.ndarray", starts: "np.ndarray", lengths: "np.ndarray") -> "np.ndarray":
    """murmur2 of every key ``data[starts[i]:starts[i] + lengths[i]]`` as uint32 (numpy arithmetic wraps)."""
    import numpy as np

    n = len(lengths)
    out = np.empty(n, dtype=np.uint32)
    for lo in range(0, n, CHUNK_KEYS):
        hi = min(n, lo + CHUNK_KEYS)
        s, ln = starts[lo:hi], lengths[lo:hi]
        first = int(s.min()) if hi > lo else 0
        last = int((s + ln).max()) if hi > lo else 0
        out[lo:hi] = _murmur2_chunk(data[first:last], s - first, ln)
    return out


def _murmur2_chunk(data: "np.ndarray", starts: "np.ndarray", lengths: "np.ndarray") -> "np.ndarray":
    import numpy as np

    u32 = np.uint32
    m = u32(_M)
    # the little-endian 32-bit word at every byte position p <= len(data) is words[base[p % 4] + p // 4] (four
    # zero bytes of padding give the last positions a whole word): one gather per block, not four byte gathers
    padded = np.concatenate([data, np.zeros(4, dtype=np.uint8)])
    views = [padded[a:a + 4 * ((len(padded) - a) // 4)].view("<u4") for a in range(4)]
    words = np.concatenate(views)
    base = np.cumsum([0] + [len(v) for v in views[:3]]).astype(np.int64)
    at = base[starts & 3] + (starts >> 2)  # the word index of each key's first byte

    h = u32(SEED) ^ lengths.astype(u32)
    blocks = lengths >> 2
    top = int(blocks.max()) if len(blocks) else 0
    if top:
        # longest keys first (a radix sort on small counts): the keys with a block at position i are a prefix
        key = (top - blocks).astype(np.uint16 if top < 1 << 16 else np.int64)
        order = np.argsort(key, kind="stable")
        w_at = at[order]
        hs = h[order]
        # keys with more than i blocks: key < top - i
        active = np.searchsorted(key[order], top - np.arange(top), side="left")
        for i in range(top):
            c = int(active[i])
            k = words[w_at[:c] + i]
            k *= m
            k ^= k >> u32(24)
            k *= m
            part = hs[:c]  # a view: updated in place
            part *= m
            part ^= k
        h[order] = hs
    rem = lengths & 3
    tail = words[at + (lengths >> 2)] & np.array(_TAIL_MASKS, dtype=u32)[rem]
    h ^= tail
    h = np.where(rem > 0, h * m, h)
    h ^= h >> u32(13)
    h *= m
    h ^= h >> u32(15)
    return h


def murmur2_array(keys: Any) -> "np.ndarray":
    """:func:`murmur2` of many keys (a sequence of bytes or a pyarrow binary array, no null among them) as an
    int32 array."""
    data, starts, lengths, nulls = _flatten(keys)
    if nulls is not None:
        raise InvalidArgumentError(f"key {int(nulls.argmax())} is null: murmur2 needs bytes (a keyless record has "
                                   f"no hash; default_partitions and Router.route_many take nulls)")
    return _murmur2_flat(data, starts, lengths).view("int32")


def default_partitions(keys: Any, num_partitions: int) -> "np.ndarray":
    """:func:`default_partition` of many keys as an int32 array; -1 for a null key (which the default
    partitioner does not place: see :data:`KEYLESS_RULE`)."""
    import numpy as np

    _check_count(num_partitions)
    data, starts, lengths, nulls = _flatten(keys)
    out = ((_murmur2_flat(data, starts, lengths) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
    if nulls is not None:
        out[nulls] = -1
    return out


_NUMBER = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class PartitionMap:
    """``--partition-map``: source partition number -> destination partition number, for every source topic of
    the restore. Several sources may map to one destination (their records merge there); a source partition
    that is not named is refused, not guessed (:meth:`Router.check_sources`)."""

    pairs: tuple[tuple[int, int], ...]
    _lookup: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        pairs = tuple(sorted((int(s), int(d)) for s, d in self.pairs))
        if not pairs:
            raise InvalidArgumentError("--partition-map names no partition: give SOURCE=DEST pairs, e.g. 0=3,1=3")
        for s, d in pairs:
            if s < 0 or d < 0:
                raise InvalidArgumentError(f"--partition-map {s}={d}: partition numbers are integers >= 0")
        lookup: dict[int, int] = {}
        for s, d in pairs:
            if s in lookup:
                raise InvalidArgumentError(f"--partition-map maps source partition {s} twice ({s}={lookup[s]} and "
                                           f"{s}={d}); each source partition goes to one destination partition")
            lookup[s] = d
        object.__setattr__(self, "pairs", pairs)
        object.__setattr__(self, "_lookup", lookup)

    @classmethod
    def parse(cls, text: str) -> "PartitionMap":
        """``"0=3,1=3,2=0"`` (spaces around items and ``=`` allowed); InvalidArgumentError (exit 2) naming the bad
        item otherwise."""
        if text is None or not str(text).strip():
            raise InvalidArgumentError("--partition-map is empty: give SOURCE=DEST pairs, e.g. 0=3,1=3")
        pairs: list[tuple[int, int]] = []
        seen: dict[int, str] = {}
        for pos, raw in enumerate(str(text).split(","), 1):
            item = raw.strip()
            if not item:
                raise InvalidArgumentError(f"--partition-map {text!r}: item {pos} is empty (a stray comma?); give "
                                           f"SOURCE=DEST pairs separated by commas, e.g. 0=3,1=3")
            src, eq, dst = item.partition("=")
            if not eq:
                raise InvalidArgumentError(f"--partition-map item {item!r} is not SOURCE=DEST (e.g. 0=3)")
            for what, v in (("source", src.strip()), ("destination", dst.strip())):
                if not _NUMBER.fullmatch(v):
                    raise InvalidArgumentError(f"--partition-map item {item!r}: {what} partition {v!r} is not a "
                                               f"partition number (an integer >= 0)")
            s, d = int(src), int(dst)
            if s in seen:
                raise InvalidArgumentError(f"--partition-map maps source partition {s} twice ({seen[s]!r} and "
                                           f"{item!r}); each source partition goes to one destination partition")
            seen[s] = item
            pairs.append((s, d))
        return cls(tuple(pairs))

    @classmethod
    def of(cls, mapping: "PartitionMap | Mapping[int, int] | str") -> "PartitionMap":
        """A map from its text, a dict, or itself (the Python API takes any)."""
        if isinstance(mapping, PartitionMap):
            return mapping
        if isinstance(mapping, str):
            return cls.parse(mapping)
        return cls(tuple(mapping.items()))

    def get(self, source_partition: int) -> int | None:
        return self._lookup.get(source_partition)

    @property
    def sources(self) -> frozenset[int]:
        return frozenset(self._lookup)

    @property
    def destinations(self) -> frozenset[int]:
        return frozenset(self._lookup.values())

    def __str__(self) -> str:
        """The canonical text (sorted by source): what :meth:`parse` reads back to an equal map."""
        return ",".join(f"{s}={d}" for s, d in self.pairs)


def _ranges(nums: Iterable[int]) -> str:
    """``0-3,7`` for partition numbers (error messages)."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(nums)):
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


@dataclass(frozen=True)
class Router:
    """Where each restored record goes in a destination topic of ``num_partitions`` partitions; ``kind`` is
    ``"same"`` (keep the partition number: today's restore), ``"default"`` (the Java producer's murmur2 on the
    key, :data:`KEYLESS_RULE` without one) or ``"map"`` (``partition_map``). Build it with :meth:`same`,
    :meth:`default`, :meth:`mapped` or :meth:`from_options`; it is frozen, hashable and picklable (tasks get it
    by value). :attr:`spec` names it in progress metadata: a restore whose router differs from the one an
    earlier run recorded cannot trust that run's coverage."""

    num_partitions: int
    kind: str = "same"
    partition_map: PartitionMap | None = None

    def __post_init__(self) -> None:
        _check_count(self.num_partitions)
        if self.kind not in ("same", "default", "map"):
            raise InvalidArgumentError(f"unknown router kind {self.kind!r} (same, default, map)")
        if (self.kind == "map") != (self.partition_map is not None):
            raise InvalidArgumentError("a router of kind 'map' takes a partition_map, and only it")
        if self.partition_map is not None:
            beyond = sorted(d for d in self.partition_map.destinations if d >= self.num_partitions)
            if beyond:
                items = ",".join(f"{s}={d}" for s, d in self.partition_map.pairs if d >= self.num_partitions)
                raise RestoreRefusedError(
                    f"--partition-map {items}: the destination has {self.num_partitions} partition(s) "
                    f"(0-{self.num_partitions - 1}), so partition {_ranges(beyond)} does not exist; map to an "
                    f"existing partition or add partitions to the destination topic first (nothing was produced)")

    @classmethod
    def same(cls, num_partitions: int) -> "Router":
        return cls(num_partitions)

    @classmethod
    def default(cls, num_partitions: int) -> "Router":
        return cls(num_partitions, "default")

    @classmethod
    def mapped(cls, partition_map: "PartitionMap | Mapping[int, int] | str", num_partitions: int) -> "Router":
        return cls(num_partitions, "map", PartitionMap.of(partition_map))

    @classmethod
    def from_options(cls, num_partitions: int, partitioner: str | None = None,
                     partition_map: "PartitionMap | Mapping[int, int] | str | None" = None) -> "Router":
        """The router for ``--partitioner`` / ``--partition-map`` (at most one of them; neither: keep partition
        numbers) into a destination of ``num_partitions`` partitions."""
        if partitioner is not None and partition_map is not None:
            raise InvalidArgumentError("--partitioner and --partition-map exclude each other: give one of them")
        if partition_map is not None:
            return cls.mapped(partition_map, num_partitions)
        if partitioner is None:
            return cls.same(num_partitions)
        if partitioner not in PARTITIONERS:
            raise InvalidArgumentError(f"--partitioner {partitioner!r} is not known; it takes "
                                       f"{', '.join(PARTITIONERS)} (Kafka's murmur2 on the key)")
        return cls.default(num_partitions)

    @property
    def spec(self) -> str:
        """A canonical text of this router, equal for equal routers: ``same/4``, ``default/12``, ``map:0=3,1=3/4``."""
        if self.kind == "map":
            return f"map:{self.partition_map}/{self.num_partitions}"
        return f"{self.kind}/{self.num_partitions}"

    @property
    def keyed(self) -> bool:
        """Whether a record's key decides its destination (else its source partition alone does)."""
        return self.kind == "default"

    def check_sources(self, source_partitions: Iterable[int]) -> None:
        """RestoreRefusedError unless every one of ``source_partitions`` (those a restore reads) has a
        destination: a map names them all, same-number needs the destination to have them."""
        srcs = set(source_partitions)
        if self.kind == "map":
            missing = sorted(srcs - self.partition_map.sources)
            if missing:
                raise RestoreRefusedError(
                    f"--partition-map {self.partition_map} does not map source partition(s) {_ranges(missing)}, "
                    f"which the restore reads; add them (e.g. {','.join(f'{s}=DEST' for s in missing[:3])}) or "
                    f"leave them out of the selection (nothing was produced)")
        elif self.kind == "same":
            beyond = sorted(s for s in srcs if s >= self.num_partitions)
            if beyond:
                raise RestoreRefusedError(
                    f"the destination has {self.num_partitions} partition(s) and the restore keeps partition "
                    f"numbers, but it reads source partition(s) {_ranges(beyond)}; use --partitioner default or "
                    f"--partition-map, or add partitions first (nothing was produced)")

    def destinations(self, source_partition: int) -> tuple[int, ...]:
        """The destination partitions records of ``source_partition`` can reach: one, unless the key decides."""
        if self.kind == "default":
            return tuple(range(self.num_partitions))
        return (self._fixed(source_partition),)

    def _fixed(self, source_partition: int) -> int:
        if self.kind == "map":
            d = self.partition_map.get(source_partition)
            if d is None:
                self.check_sources([source_partition])
            return d
        if source_partition >= self.num_partitions:
            self.check_sources([source_partition])
        return source_partition

    def route(self, source_partition: int, key: bytes | None) -> int:
        """The destination partition of a record of ``source_partition`` with ``key`` (None: no key)."""
        if self.kind != "default":
            return self._fixed(source_partition)
        if key is None:
            return source_partition % self.num_partitions
        return to_positive(murmur2(key)) % self.num_partitions

    def route_many(self, source_partition: int, keys: Any) -> "np.ndarray":
        """:meth:`route` of many records of one source partition (``keys``: a sequence of bytes/None or a pyarrow
        binary array) as an int32 array."""
        import numpy as np

        if self.kind != "default":
            n = len(keys) if hasattr(keys, "__len__") else sum(1 for _k in keys)
            return np.full(n, self._fixed(source_partition), dtype=np.int32)
        out = default_partitions(keys, self.num_partitions)
        out[out < 0] = source_partition % self.num_partitions
        return out

    def split(self, source_partition: int, keys: Any) -> dict[int, "np.ndarray"]:
        """The positions of ``keys`` (records of one source partition, in source order) by destination partition,
        each in source order: what one destination's producer sends, in that order."""
        import numpy as np

        dest = self.route_many(source_partition, keys)
        if not len(dest):
            return {}
        order = np.argsort(dest, kind="stable")
        parts, first = np.unique(dest[order], return_index=True)
        return {int(p): idx for p, idx in zip(parts, np.split(order, first[1:]))}
