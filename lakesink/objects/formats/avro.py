"""Avro object container files (Confluent ``AvroFormat``; spec §2, §5).

Writer schema = the first record's schema (VALUE: ``value_schema.avro``; a schemaless bytes/str
value gets ``"bytes"``/``"string"``; anything else schemaless is an EncodeError, Confluent needs a
schema). KEYS: ``record.extra["key_schema"]`` (ValueSchema or Avro schema) if present, else the
primitive schema of the first key (bytes/string/long/double/boolean); a key schema with a registry id (keys
decoded from wire-format Avro) is named in the container metadata (:data:`KEY_SCHEMA_ID`). HEADERS: the bare array of
``{key: string, value: ["null","string"]}`` records (Confluent's value is a required string, which
makes a null header value fail there; we keep it as null instead).

Fast path: a record whose ``raw_value`` is Confluent wire format (magic 0 + 4-byte schema id +
Avro binary) for the file's writer schema (same canonical-form fingerprint and the wire id equal to
``value_schema.id``) is copied into the block as its payload bytes, without decode/re-encode.
The check on the id keeps a record whose value was projected to another schema off the fast path.
Bare Avro (no wire header, a fixed ``value.schema``): a record whose ``raw_avro`` has the writer
schema's fingerprint is copied whole (the sink sets ``raw_avro`` only for values the bare-Avro
decoder read as exactly one datum of that schema; a projected record keeps its old ``raw_avro``).

Values are raw Avro values (see :mod:`lakesink.schemas.avro`): fastavro writes ints/bytes given for
logical types unchanged, and :meth:`AvroFormat.read` returns raw values again (not datetimes).
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
from typing import Any, BinaryIO, Iterator, Sequence

import fastavro
from fastavro.write import Writer

from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.schemas.avro import fingerprint, primitive_schema_for, raw_parsed_schema
from lakesink.objects.formats.base import (Format, FormatWriter, RecordView, binary_run, encode_error, header_pairs, record_key)
from lakesink.errors import CorruptObjectError, EmptyFileError, InvalidArgumentError
from lakesink.objects.formats.avro_columns import read_bytes_array, read_headers_arrays  # noqa: F401 - re-exported
from lakesink.objects.formats.avro_sides import AvroSideWriting

CODECS = ("null", "deflate", "snappy", "bzip2", "zstandard", "xz")
#: Container metadata of a ``.keys`` Avro file whose keys came in Confluent wire-format Avro: their schema's
#: registry id (every key of the file has it: a new key schema starts new files).
KEY_SCHEMA_ID = "lakesink.key.schema.id"
#: Bytes of an object first read for its container header (doubled until the header is whole, up to the maximum)
HEADER_READ_BYTES = 4096
MAX_HEADER_BYTES = 64 * 1024 * 1024
DEFAULT_SYNC_INTERVAL = 64000  # Avro Java's DataFileWriter default (Confluent's files)

HEADERS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "record",
        "name": "ConnectDefault",
        "namespace": "io.confluent.connect.avro",
        "fields": [
            {"name": "key", "type": "string"},
            {"name": "value", "type": ["null", "string"]},
        ],
    },
}


class _Block:
    """The two attributes fastavro's ``Writer.write_block`` reads from a ``read.Block``."""

    __slots__ = ("num_records", "bytes_")

    def __init__(self, num_records: int, data: bytes):
        self.num_records = num_records
        self.bytes_ = io.BytesIO(data)


class AvroFormat(Format):
    """``avro`` format: options ``codec`` (null|deflate|snappy|bzip2|zstandard|xz), ``codec_level``,
    ``sync_interval`` (uncompressed bytes per block, default 64000), ``fast_path`` (default True)."""

    name = "avro"
    extension = ".avro"
    record_bytes_rule = "Avro binary of the writer schema; Confluent wire format when the row has a schema_id"
    compression_option = "codec"
    schema_per_file = True

    @classmethod
    def options_from(cls, settings: Any) -> dict[str, Any]:
        return {"codec": settings.avro_codec}

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes]:
        """The datums as archived (the writer schema's Avro binary), framed in Confluent's wire format when the
        row has a schema id; a schemaless file (writer schema ``bytes``/``string``) gives the values' own bytes."""
        from lakesink.objects.formats.record_bytes import avro_values

        return avro_values(data, schema_id, where)

    def key_bytes(self, data: bytes, key_decoder: str) -> Any:
        """Keys decoded from wire-format Avro framed again with the schema id the file names
        (:data:`KEY_SCHEMA_ID`); bytes/string keys a column at a time; others as :meth:`Format.key_bytes`."""
        if key_decoder != "json":
            from lakesink.objects.formats.record_bytes import wire_framed_keys

            keys = wire_framed_keys(data, KEY_SCHEMA_ID) if key_decoder == "avro" else None
            if keys is None:
                keys = read_bytes_array(io.BytesIO(data))
            if keys is not None:
                return keys
        return super().key_bytes(data, key_decoder)

    @classmethod
    def writer_schema(cls, read_range: Any, size: Any) -> Any | None:
        """The container header's schema: the first :data:`HEADER_READ_BYTES`, doubled until the header is whole."""
        n = HEADER_READ_BYTES
        while True:
            data = read_range(0, n - 1)
            schema = header_schema(data)
            if schema is not None:
                return schema
            if len(data) < n or n >= MAX_HEADER_BYTES:  # the whole object (or more than any header) read
                raise CorruptObjectError("Avro object ends inside its container header")
            n *= 2

    def header_columns(self, data: bytes) -> tuple[Any, Any, Any] | None:
        return read_headers_arrays(io.BytesIO(data))  # lakesink's headers schema: a column at a time

    def columnar_keys(self, key_decoder: str) -> bool:
        return key_decoder in ("bytes", "string")  # files of bytes / string keys without a schema

    def columnar_headers(self) -> bool:
        return True

    def key_payloads(self, keys: Any, key_decoder: str) -> tuple[Any, Any] | None:
        """Each key's ``bytes``/``string`` datum (a string key's bytes must be valid UTF-8, as the string decoder
        requires)."""
        import pyarrow as pa

        from lakesink.objects.formats.side_columns import avro_bytes_datums

        if key_decoder == "string":
            try:
                keys.cast(pa.large_string() if pa.types.is_large_binary(keys.type) else pa.string())
            except pa.ArrowInvalid:
                return None
        return avro_bytes_datums(keys), key_decoder

    def header_payloads(self, headers: Any) -> tuple[Any, Any] | None:
        from lakesink.objects.formats.side_columns import avro_headers_datums

        datums = avro_headers_datums(headers)
        return None if datums is None else (datums, None)

    def columnar_kind(self, decoder: Any) -> str | None:
        if not self.fast_path or decoder.name != "avro":
            return None
        if not decoder.wire_format and decoder.fixed_schema is not None:
            return "avro"  # bare datums of one fixed schema
        if decoder.wire_format and decoder.fixed_schema is None:
            return "avro_wire"
        return None

    def __init__(self, codec: str = "null", codec_level: int | None = None,
                 sync_interval: int = DEFAULT_SYNC_INTERVAL, fast_path: bool = True):
        codec = {"zstd": "zstandard", "none": "null"}.get(codec, codec)
        if codec not in CODECS:
            raise InvalidArgumentError(f"avro codec {codec!r} not supported; expected one of {list(CODECS)}")
        if sync_interval < 1:
            raise InvalidArgumentError("sync_interval must be >= 1")
        self.codec, self.codec_level = codec, codec_level
        self.sync_interval, self.fast_path = sync_interval, fast_path

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE,
                    sync_marker: bytes | None = None) -> "AvroWriter":
        """``sync_marker``: the container's 16-byte sync marker (None: random, as Avro writers do)."""
        if sync_marker is not None and len(sync_marker) != 16:
            raise InvalidArgumentError(f"an Avro sync marker has 16 bytes, not {len(sync_marker)}")
        return AvroWriter(self, out, self._check_view(view), sync_marker)

    def open_object_writer(self, out: BinaryIO, view: RecordView, key: str) -> "AvroWriter":
        return self.open_writer(out, view, sync_marker=sync_marker_for(key))

    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[Any]:
        """Yield raw Avro values (HEADERS: lists of (key, value) tuples)."""
        view = RecordView(view)
        blocks = fastavro.block_reader(stream)
        schema = raw_parsed_schema(blocks.writer_schema)
        reader = fastavro.schemaless_reader
        for block in blocks:
            buf = block.bytes_
            for _ in range(block.num_records):
                v = reader(buf, schema, None)
                yield [(h["key"], h["value"]) for h in v] if view is RecordView.HEADERS else v


def sync_marker_for(key: str) -> bytes:
    """The sync marker of the Avro object at ``key``: the MD5 of the key. Confluent's writer draws a random one;
    any 16 bytes are valid Avro, and a marker fixed by the key makes a replayed batch's object byte-identical to
    the orphan a crashed run left, so the sink adopts it instead of failing on a same-key, different-bytes
    object."""
    return hashlib.md5(b"lakesink avro sync marker\0" + key.encode()).digest()


class AvroWriter(AvroSideWriting, FormatWriter):
    def __init__(self, fmt: AvroFormat, out: BinaryIO, view: RecordView, sync_marker: bytes | None = None):
        super().__init__(out, view)
        self._fmt = fmt
        self._sync_marker = sync_marker or b""  # fastavro draws a random marker for b""
        self._w: Writer | None = None
        self._fp: str | None = None          # fingerprint of the writer schema
        self._schema_id: bytes | None = None  # wire prefix accepted by the fast path
        self._bare_fp: str | None = None       # raw_avro fingerprint accepted by the bare fast path
        self._schemaless: str | None = None   # "bytes"/"string" file from schemaless values
        self._raw: list[bytes] = []           # fast-path payloads of the current block
        self._raw_size = 0
        self._raw_extra = 0  # records in _raw beyond one per item (write_payloads adds runs as one item)
        if view is RecordView.HEADERS:
            self._open(HEADERS_SCHEMA, None)

    # -- schema of the file

    def _open(self, avro: Any, vs: ValueSchema | None) -> None:
        f = self._fmt
        self._fp = vs.fingerprint if vs is not None else fingerprint(avro)
        if vs is not None and vs.id is not None and f.fast_path and vs.avro_wire:
            self._schema_id = b"\x00" + vs.id.to_bytes(4, "big")
        if vs is not None and f.fast_path and vs.avro_wire:
            self._bare_fp = vs.fingerprint
        metadata = None
        if self.view is RecordView.KEYS and vs is not None and vs.id is not None and vs.avro_wire:
            # the registry id of the keys' schema: restore re-frames each key in Confluent wire format with it
            metadata = {KEY_SCHEMA_ID: str(vs.id)}
        self._w = Writer(self._sink, copy.deepcopy(avro), codec=f.codec, sync_interval=f.sync_interval,
                         compression_level=f.codec_level, sync_marker=self._sync_marker, metadata=metadata)

    def _open_from(self, record: SinkRecord) -> None:
        if self.view is RecordView.VALUE:
            vs, v = record.value_schema, record.value
        else:
            ks = record.extra.get("key_schema") if record.extra else None
            vs = ks if isinstance(ks, ValueSchema) else None
            v = record.key
            if ks is not None and vs is None:
                self._open(ks, None)
                return
        if vs is not None:
            self._open(vs.avro, vs)
            return
        prim = primitive_schema_for(v)
        if self.view is RecordView.VALUE and prim not in ("bytes", "string"):
            raise encode_error(record, f"Avro format needs a schema'd value (value.decoder=avro); got a "
                                       f"schemaless {type(v).__name__}")
        if prim is None:
            raise encode_error(record, f"Avro keys need a schema (extra['key_schema']) for {type(v).__name__}")
        self._schemaless = prim
        self._open(prim, None)

    # -- writing

    def write(self, record: SinkRecord) -> None:
        if self.view is not RecordView.VALUE:
            self._write_view(record)
            return
        value = record.value
        if value is None:
            raise encode_error(record, "null value (tombstone) cannot be written to a value file")
        if self._w is None:
            self._open_from(record)
        vs = record.value_schema
        if vs is not None:
            if vs.fingerprint != self._fp:
                raise encode_error(record, f"value schema {vs.name or vs.fingerprint[:12]} differs from the "
                                           "file's writer schema (the file should have been rotated)")
            raw = record.raw_value
            if raw is not None and raw[:5] == self._schema_id:
                self._append_raw(raw)
                return
            ra = record.raw_avro
            if raw is not None and ra is not None and ra.fingerprint == self._bare_fp:
                self._append_payload(raw)
                return
        elif self._schemaless is None or primitive_schema_for(value) != self._schemaless:
            raise encode_error(record, "schemaless value in a file with an Avro record schema")
        self._write_value(record, value)

    def write_many(self, records: Sequence[SinkRecord]) -> None:
        """:meth:`write` for each record, with its checks inlined in one loop that hands values
        straight to fastavro's encoder (and wire payloads straight to the block), so blocks, errors
        and ``record_count`` are exactly those of :meth:`write`."""
        if self.view is not RecordView.VALUE:
            self._write_many_view(records)
            return
        n, i = len(records), 0
        while i < n and self._w is None:  # the first record opens the file (writer schema)
            self.write(records[i])
            i += 1
        if i >= n:
            return
        run = records if i == 0 else records[i:]
        if self._schemaless is not None:  # a bytes/string file from schemaless values: rare
            super().write_many(run)
            return
        fp, sid, sync, bare_fp = self._fp, self._schema_id, self._fmt.sync_interval, self._bare_fp
        encode = self._w.write
        raws = self._raw
        done = 0  # encoded records not yet added to record_count
        try:
            for r in run:
                value = r.value
                vs = r.value_schema
                if value is None or vs is None or vs.fingerprint != fp:
                    self.write(r)  # raises the EncodeError write() raises
                    continue
                raw = r.raw_value
                payload = None
                if raw is not None:
                    ra = r.raw_avro
                    if ra is not None and ra.fingerprint == bare_fp:
                        payload = raw  # bare Avro: the whole value is the datum
                    elif raw[:5] == sid:
                        payload = raw[5:]  # wire format of this file's schema id
                if payload is not None:
                    raws.append(payload)
                    self._raw_size += len(payload)
                    self.record_count += 1
                    if self._raw_size >= sync:
                        self._flush_raw()
                    continue
                if raws:
                    self._flush_raw()
                self._encode(encode, value, r)
                done += 1
        finally:
            self.record_count += done

    def write_payloads(self, payloads, schema: ValueSchema | None = None) -> None:
        """Columnar :meth:`write_many` for records whose values are exactly one bare Avro datum of
        ``schema`` each (``payloads``: pyarrow binary array, no nulls): the datums are copied into
        blocks cut exactly where the record path cuts them (a block closes after the record that
        brings it to ``sync_interval`` bytes), so the file is byte-identical."""
        if self.view is not RecordView.VALUE:
            self._write_view_datums(payloads, schema)
            return
        if schema is None:
            raise InvalidArgumentError("Avro columnar writes take VALUE payloads with their schema")
        if self._w is None:
            self._open(schema.avro, schema)
        if schema.fingerprint != self._fp or self._bare_fp != schema.fingerprint or self._schemaless:
            raise InvalidArgumentError(f"payloads of schema {schema.name or schema.fingerprint[:12]} do not fit this file")
        self._append_run(payloads)

    def _append_run(self, payloads) -> None:
        """Datums (a pyarrow binary array, no nulls) into blocks cut where fastavro's ``Writer.write`` cuts
        them: a block closes after the datum that brings it to ``sync_interval`` bytes."""
        import numpy as np

        data, ends = binary_run(payloads)
        n, i, pos, sync = len(ends), 0, 0, self._fmt.sync_interval
        while i < n:
            # the first record at which the open block reaches sync_interval bytes
            j = int(np.searchsorted(ends, pos + sync - self._raw_size, side="left"))
            if j >= n:
                self._raw.append(bytes(data[pos:]))  # the tail outlives the caller's buffer
                self._raw_size += int(ends[-1]) - pos
                self._raw_extra += n - i - 1
                self.record_count += n - i
                return
            end = int(ends[j])
            self._raw.append(data[pos:end])
            self._raw_size += end - pos
            self._raw_extra += j - i
            self.record_count += j + 1 - i
            self._flush_raw()
            pos, i = end, j + 1

    def _encode(self, encode, value, record: SinkRecord) -> None:
        """Encode one datum; on failure drop its partial bytes and name the record."""
        try:
            encode(value)
        except Exception as e:  # fastavro: TypeError/ValueError/KeyError/AttributeError/OverflowError
            self._drop_partial_record()
            raise encode_error(record, f"value does not match Avro schema: {type(e).__name__}: {e}") from None

    def _write_many_view(self, records: Sequence[SinkRecord]) -> None:
        """KEYS/HEADERS: :meth:`_write_view` for each record, in one loop."""
        n, i = len(records), 0
        while i < n and self._w is None:  # the first record opens the file (writer schema)
            self.write(records[i])
            i += 1
        if i >= n:
            return
        if self._datum_view():
            self._write_view_records(records if i == 0 else records[i:])
            return
        if self._raw:
            self._flush_raw()
        encode = self._w.write
        keys = self.view is RecordView.KEYS
        done = 0
        try:
            for r in (records if i == 0 else records[i:]):
                value = record_key(r) if keys else [{"key": k, "value": v} for k, v in header_pairs(r)]
                self._encode(encode, value, r)
                done += 1
        finally:
            self.record_count += done

    def _write_view(self, record: SinkRecord) -> None:
        if self.view is RecordView.KEYS:
            value = record_key(record)
        else:
            value = [{"key": k, "value": v} for k, v in header_pairs(record)]
        if self._w is None:
            self._open_from(record)
        if self._datum_view():
            self._write_view_records((record,))
            return
        self._write_value(record, value)

    def _append_raw(self, raw: bytes) -> None:
        self._append_payload(raw[5:])

    def _append_payload(self, payload: bytes) -> None:
        self._raw.append(payload)
        self._raw_size += len(payload)
        self.record_count += 1
        if self._raw_size >= self._fmt.sync_interval:
            self._flush_raw()

    def _flush_raw(self) -> None:
        if self._raw:
            # write_block first dumps fastavro's own pending records, so file order is kept
            self._w.write_block(_Block(len(self._raw) + self._raw_extra, b"".join(self._raw)))
            self._raw.clear()
            self._raw_size = 0
            self._raw_extra = 0

    def _write_value(self, record: SinkRecord, value: Any) -> None:
        if self._raw:
            self._flush_raw()
        w = self._w
        self._encode(w.write, value, record)
        self.record_count += 1

    def _drop_partial_record(self) -> None:
        """A failed write leaves part of a record in fastavro's block buffer (block_count is not
        incremented). Re-read the good records to find where they end, emit them as a block of
        their own and clear the buffer, so the writer stays usable (the DLQ case). Rare path, so
        no per-record bookkeeping is spent on it."""
        w = self._w
        data, count = w.io.getvalue(), w.block_count
        buf = io.BytesIO(data)
        schema = raw_parsed_schema(json.loads(w.metadata["avro.schema"]))
        for _ in range(count):
            fastavro.schemaless_reader(buf, schema, None)
        w.io.clear()
        w.block_count = 0
        if count:
            w.write_block(_Block(count, data[:buf.tell()]))

    def _finish(self) -> None:
        if self._w is None:
            raise EmptyFileError("Avro writer closed with no record: the writer schema comes from the first record")
        self._flush_raw()
        self._w.flush()


AVRO_MAGIC = b"Obj\x01"


def header_schema(data: bytes) -> Any | None:
    """The writer schema in the container header at the start of ``data`` (the first bytes of an Avro object
    file); None when ``data`` ends inside the header (read more and ask again). Raises CorruptObjectError
    when ``data`` is not an Avro container."""
    from fastavro.read import HEADER_SCHEMA

    from lakesink.errors import CorruptObjectError

    if len(data) < len(AVRO_MAGIC):
        return None
    if data[:4] != AVRO_MAGIC:
        raise CorruptObjectError("not an Avro object container file (no 'Obj\\x01' magic)")
    try:
        header = fastavro.schemaless_reader(io.BytesIO(data), HEADER_SCHEMA, None)
    except (EOFError, StopIteration, IndexError):  # fastavro's readers end a truncated buffer in several ways
        return None
    except Exception as e:  # noqa: BLE001 - fastavro raises ValueError, UnicodeDecodeError, ...
        raise CorruptObjectError(f"unreadable Avro container header: {e}") from None
    text = header["meta"].get("avro.schema")
    if text is None:
        raise CorruptObjectError("Avro container header without 'avro.schema'")
    try:
        return json.loads(text.decode("utf-8"))
    except ValueError as e:
        raise CorruptObjectError(f"Avro container header's schema is not JSON: {e}") from None
