"""Parquet (Confluent ``ParquetFormat``; spec §2, §1.2, §5) via pyarrow's streaming ParquetWriter.

The file schema is the first record's Avro record schema mapped to Arrow (see
:func:`lakesink.schemas.avro.avro_to_arrow_schema`); a schemaless value is an EncodeError (Confluent
needs a Struct). Rows are buffered and written as one row group every ``row_group_size`` records,
so memory is bounded by a row group. The Avro schema is stored in the footer under
``parquet.avro.schema`` as parquet-avro does. KEYS view: struct ``{key}`` (Confluent's
``RecordKey``); HEADERS view: ``{headers: list<struct<key, value>>}`` (``RecordHeaders``).

Codecs: none, snappy (default), gzip, zstd, brotli, lz4_raw. parquet-mr's ``lz4`` is Hadoop-framed
LZ4, which pyarrow cannot write, and ``lzo`` is unsupported: both are rejected.
"""
from __future__ import annotations

import json
from operator import itemgetter
from typing import Any, BinaryIO, Iterator, Sequence

import fastavro.validation

from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.schemas.avro import arrow_value_converter, avro_to_arrow_schema, primitive_schema_for, raw_parsed_schema
from lakesink.errors import EmptyFileError, InvalidArgumentError, SchemaError
from lakesink.objects.formats.base import (Format, FormatWriter, RangeFile, RecordView, encode_error, header_pairs,
                                          record_key)

#: codec option -> (pyarrow compression, extension prefix per parquet-mr's CompressionCodecName)
CODECS = {
    "none": ("NONE", ""),
    "uncompressed": ("NONE", ""),
    "snappy": ("SNAPPY", ".snappy"),
    "gzip": ("GZIP", ".gz"),
    "zstd": ("ZSTD", ".zstd"),
    "brotli": ("BROTLI", ".br"),
    "lz4_raw": ("LZ4", ".lz4raw"),  # pyarrow's "lz4" writes the LZ4_RAW codec
}
DEFAULT_ROW_GROUP_SIZE = 65536
PAGE_SIZE = 64 * 1024  # Confluent's parquet page size

HEADERS_AVRO = {
    "type": "record", "name": "RecordHeaders",
    "fields": [{"name": "headers", "type": {"type": "array", "items": {
        "type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro",
        "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": ["null", "string"]}]}}}],
}


class ParquetFormat(Format):
    """``parquet`` format: options ``codec`` (see CODECS; default snappy), ``row_group_size``
    (records per row group), ``compression_level`` (codec level, optional)."""

    name = "parquet"
    record_bytes_rule = "the row as Avro binary of the file's Avro schema; wire format when the row has a schema_id"
    compression_option = "codec"
    schema_per_file = True

    @classmethod
    def options_from(cls, settings: Any) -> dict[str, Any]:
        return {"codec": settings.parquet_codec}

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes]:
        """Each row re-encoded as Avro binary with the file's ``parquet.avro.schema``, framed like Avro."""
        from lakesink.objects.formats.record_bytes import parquet_values

        return parquet_values(self, data, schema_id, where)

    @classmethod
    def writer_schema(cls, read_range: Any, size: Any) -> Any | None:
        """The footer's ``parquet.avro.schema``, reading only the footer."""
        return footer_avro_schema(RangeFile(read_range, size()))

    def columnar_kind(self, decoder: Any) -> str | None:
        """``parquet`` for bare Avro of one fixed schema (the caller also checks Spark decodes it alike)."""
        if decoder.name == "avro" and not decoder.wire_format and decoder.fixed_schema is not None:
            return "parquet"
        return None

    def __init__(self, codec: str = "snappy", row_group_size: int = DEFAULT_ROW_GROUP_SIZE,
                 compression_level: int | None = None):
        codec = (codec or "none").lower()
        if codec in ("lz4", "lzo"):
            raise InvalidArgumentError(f"parquet codec {codec!r} (Hadoop framing) cannot be written by pyarrow; use lz4_raw")
        if codec not in CODECS:
            raise InvalidArgumentError(f"parquet codec {codec!r} not supported; expected one of {sorted(CODECS)}")
        if row_group_size < 1:
            raise InvalidArgumentError("row_group_size must be >= 1")
        self.codec = "none" if codec == "uncompressed" else codec
        self.compression, ext = CODECS[codec]
        self.extension = ext + ".parquet"
        self.row_group_size = int(row_group_size)
        self.compression_level = compression_level

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE) -> "ParquetFormatWriter":
        return ParquetFormatWriter(self, out, self._check_view(view))

    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[Any]:
        """Yield rows as dicts (timestamps/dates/times as raw ints, decimals as Decimal);
        KEYS: the keys; HEADERS: lists of (key, value) tuples."""
        import pyarrow.parquet as pq

        view = RecordView(view)
        if not hasattr(stream, "seek") or not stream.seekable():
            import io

            stream = io.BytesIO(stream.read())  # the footer is at the end
        pf = pq.ParquetFile(stream)
        raw = _raw_arrow_schema(pf.schema_arrow)
        for batch in pf.iter_batches():
            import pyarrow as pa

            rows = pa.Table.from_batches([batch]).cast(raw).to_pylist()
            for r in rows:
                if view is RecordView.KEYS:
                    yield r["key"]
                elif view is RecordView.HEADERS:
                    yield [(h["key"], h["value"]) for h in r["headers"]]
                else:
                    yield r


def _raw_arrow_type(t):
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_timestamp(t) or pt.is_time64(t):
        return pa.int64()
    if pt.is_date32(t) or pt.is_time32(t):
        return pa.int32()
    if pt.is_struct(t):
        return pa.struct([f.with_type(_raw_arrow_type(f.type)) for f in t])
    if pt.is_map(t):
        return pa.map_(t.key_field, t.item_field.with_type(_raw_arrow_type(t.item_type)))
    if pt.is_list(t):
        return pa.list_(t.value_field.with_type(_raw_arrow_type(t.value_type)))
    return t


def _raw_arrow_schema(schema):
    import pyarrow as pa

    return pa.schema([f.with_type(_raw_arrow_type(f.type)) for f in schema], metadata=schema.metadata)


class ParquetFormatWriter(FormatWriter):
    def __init__(self, fmt: ParquetFormat, out: BinaryIO, view: RecordView):
        super().__init__(out, view)
        self._fmt = fmt
        self._pw = None
        self._arrow_schema = None
        self._avro: Any = None
        self._fp: str | None = None
        self._trusted_prefix: bytes | None = None
        self._validate_schema = None
        self._convert = None
        self._rows: list[Any] = []
        self._row_records: list[SinkRecord] = []  # parallel to _rows: names a row Arrow rejects
        self._chunks: list[Any] = []  # Arrow tables of the current row group, before _rows (write_payloads)
        self._chunk_rows = 0

    def _open(self, record: SinkRecord) -> None:
        view = self.view
        vs: ValueSchema | None = None
        if view is RecordView.VALUE:
            vs = record.value_schema
            if vs is None:
                raise encode_error(record, "Parquet format needs a schema'd record value (value.decoder=avro); "
                                           f"got a schemaless {type(record.value).__name__}")
            avro = vs.avro
            if vs.id is not None:
                self._trusted_prefix = b"\x00" + vs.id.to_bytes(4, "big")
        elif view is RecordView.KEYS:
            ks = (record.extra or {}).get("key_schema")
            key_avro = ks.avro if isinstance(ks, ValueSchema) else ks or primitive_schema_for(record.key)
            if key_avro is None:
                raise encode_error(record, f"Parquet keys need a schema (extra['key_schema']) for "
                                           f"{type(record.key).__name__}")
            avro = {"type": "record", "name": "RecordKey", "fields": [{"name": "key", "type": key_avro}]}
        else:
            avro = HEADERS_AVRO
        try:
            self._open_schema(avro, vs)
        except SchemaError as e:
            raise encode_error(record, str(e)) from None

    def _open_schema(self, avro: Any, vs: ValueSchema | None) -> None:
        import pyarrow.parquet as pq

        self._arrow_schema = avro_to_arrow_schema(avro, {"parquet.avro.schema": json.dumps(avro)})
        self._avro = avro
        self._getters = [itemgetter(name) for name in self._arrow_schema.names]
        self._fp = vs.fingerprint if vs is not None else None
        self._validate_schema = raw_parsed_schema(avro)
        self._convert = arrow_value_converter(avro)
        f = self._fmt
        self._pw = pq.ParquetWriter(self._sink, self._arrow_schema, compression=f.compression,
                                    compression_level=f.compression_level, use_dictionary=True,
                                    data_page_size=PAGE_SIZE)

    def _value_row(self, record: SinkRecord) -> tuple[Any, bool]:
        """VALUE view: the record's row and whether it was decoded from this schema's wire bytes
        (then it needs no validation); raises EncodeError for a value the file cannot hold."""
        row = record.value
        if row is None:
            raise encode_error(record, "null value (tombstone) cannot be written to a value file")
        if self._pw is None:
            self._open(record)
        vs = record.value_schema
        if vs is None or vs.fingerprint != self._fp:
            raise encode_error(record, "value schema differs from the file's schema (the file should have "
                                       "been rotated)")
        raw = record.raw_value
        ra = record.raw_avro  # bare Avro decoded with this very schema (see SinkRecord.raw_avro)
        return row, raw is not None and (raw[:5] == self._trusted_prefix or
                                         (ra is not None and ra.fingerprint == self._fp))

    def write(self, record: SinkRecord) -> None:
        view = self.view
        if view is RecordView.VALUE:
            row, trusted = self._value_row(record)
        else:
            if view is RecordView.KEYS:
                row = {"key": record_key(record)}
            else:
                row = {"headers": [{"key": k, "value": v} for k, v in header_pairs(record)]}
            if self._pw is None:
                self._open(record)
            trusted = False
        # Validate here, where the record can still be named, unless the value was decoded from this
        # very schema's wire bytes. (What passes but still fails Arrow's conversion, e.g. a decimal
        # wider than its precision, is found and named when the row group is converted.)
        if not trusted and not fastavro.validation.validate(row, self._validate_schema, raise_errors=False):
            raise encode_error(record, "value does not match the file's Avro schema")
        if self._convert is not None:
            row = self._convert(row)
        rows = self._rows
        rows.append(row)
        self._row_records.append(record)
        self.record_count += 1
        if len(rows) + self._chunk_rows >= self._fmt.row_group_size:
            self._flush_rows()

    def write_many(self, records: Sequence[SinkRecord]) -> None:
        """The per-record checks of :meth:`write` in one tight loop per row group; the row group is
        converted to Arrow columns in one batch (``Table.from_pylist``) when it is full, as with
        :meth:`write`, so row groups, errors and ``record_count`` are exactly those of :meth:`write`."""
        if self.view is not RecordView.VALUE:
            super().write_many(records)
            return
        n, i = len(records), 0
        while i < n and self._pw is None:  # the first record opens the file (schema, writer)
            self.write(records[i])
            i += 1
        rows, row_records = self._rows, self._row_records
        fp, prefix, schema, convert = self._fp, self._trusted_prefix, self._validate_schema, self._convert
        validate = fastavro.validation.validate
        append = rows.append
        group = self._fmt.row_group_size
        while i < n:
            j = min(n, i + group - len(rows) - self._chunk_rows)
            run = records if (i == 0 and j == n) else records[i:j]
            before = len(rows)
            try:
                for r in run:
                    row = r.value
                    vs = r.value_schema
                    if row is None or vs is None or vs.fingerprint != fp:
                        self._value_row(r)  # raises the EncodeError write() raises
                    raw = r.raw_value
                    ra = r.raw_avro
                    if (raw is None or (raw[:5] != prefix and (ra is None or ra.fingerprint != fp))) \
                            and not validate(row, schema, raise_errors=False):
                        raise encode_error(r, "value does not match the file's Avro schema")
                    append(row if convert is None else convert(row))
            finally:
                done = len(rows) - before
                row_records.extend(run if done == len(run) else run[:done])
                self.record_count += done
            i = j
            if len(rows) + self._chunk_rows >= group:
                self._flush_rows()

    def write_payloads(self, payloads, schema: ValueSchema | None = None) -> None:
        """Columnar :meth:`write_many` for VALUE rows given as a pyarrow Table whose columns cast to
        this file's Arrow schema (the sink's columnar path: rows Spark decoded from bare Avro, for
        schemas it decodes alike): the rows join the current row group, which is written where
        :meth:`write_many` writes it."""
        if self.view is not RecordView.VALUE or schema is None:
            raise InvalidArgumentError("Parquet columnar writes take VALUE rows with their schema")
        if self._pw is None:
            self._open_schema(schema.avro, schema)
        if schema.fingerprint != self._fp:
            raise InvalidArgumentError(f"rows of schema {schema.name or schema.fingerprint[:12]} do not fit this file")
        table = payloads if payloads.schema.equals(self._arrow_schema) else payloads.cast(self._arrow_schema)
        if self._rows:  # per-record rows of this row group come first
            self._chunks.append(self._rows_table())
            self._chunk_rows += len(self._chunks[-1])
        group, n, i = self._fmt.row_group_size, len(table), 0
        while i < n:
            take = min(n - i, group - self._chunk_rows)
            self._chunks.append(table.slice(i, take))
            self._chunk_rows += take
            self.record_count += take
            i += take
            if self._chunk_rows >= group:
                self._flush_rows()

    def _flush_rows(self) -> None:
        import pyarrow as pa

        if not self._rows and not self._chunks:
            return
        parts = self._chunks + ([self._rows_table()] if self._rows else [])
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts).combine_chunks()
        self._chunks = []
        self._chunk_rows = 0
        self._pw.write_table(table, row_group_size=len(table))

    def _rows_table(self):
        """The buffered per-record rows as an Arrow table (buffer cleared); a row Arrow rejects is
        dropped from the buffer and named."""
        import pyarrow as pa

        rows = self._rows
        try:
            table = self._to_table(rows)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            bad = self._first_bad_row()
            if bad is None:
                raise
            record = self._row_records.pop(bad)
            del rows[bad]
            self.record_count -= 1
            # the other rows stay buffered: the writer is still usable (the DLQ case)
            raise encode_error(record, f"value cannot be converted to the Parquet column types: "
                                       f"{type(e).__name__}: {e}") from None
        rows.clear()
        self._row_records.clear()
        return table

    def _to_table(self, rows: list[Any]):
        """``Table.from_pylist(rows, schema)``, with the columns gathered by C-level ``itemgetter``
        maps (from_pylist runs a Python comprehension with two dict lookups per cell); a row that
        lacks a field (Avro validation accepts a missing field that has a default) takes
        from_pylist's path, which gives it a null there."""
        import pyarrow as pa

        schema = self._arrow_schema
        try:
            columns = [list(map(get, rows)) for get in self._getters]
        except (KeyError, TypeError):
            return pa.Table.from_pylist(rows, schema=schema)
        return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)

    def _first_bad_row(self) -> int | None:
        """Index of the first buffered row Arrow cannot convert on its own (bisecting: about
        2 conversions of the row group), or None if every row converts alone."""
        import pyarrow as pa

        rows, schema = self._rows, self._arrow_schema

        def converts(lo: int, hi: int) -> bool:
            try:
                pa.Table.from_pylist(rows[lo:hi], schema=schema)
                return True
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                return False

        lo, hi = 0, len(rows)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if converts(lo, mid):
                lo = mid
            else:
                hi = mid
        return None if hi <= lo or converts(lo, hi) else lo

    def _finish(self) -> None:
        if self._pw is None:
            raise EmptyFileError("Parquet writer closed with no record: the schema comes from the first record")
        self._flush_rows()
        self._pw.close()


#: The footer key parquet-avro (and this format) stores the Avro schema under.
AVRO_SCHEMA_KEY = b"parquet.avro.schema"


def footer_avro_schema(source: Any) -> Any | None:
    """The Avro schema in a Parquet file's footer (``parquet.avro.schema``), None when the file has none.
    ``source``: a seekable binary file object; pyarrow reads only the footer (the last bytes, then the
    rest of the footer if it is longer)."""
    import pyarrow.parquet as pq

    from lakesink.errors import CorruptObjectError

    try:
        meta = pq.read_metadata(source).metadata or {}
    except Exception as e:  # noqa: BLE001 - ArrowInvalid for a non-Parquet file, OSError from the source
        raise CorruptObjectError(f"unreadable Parquet footer: {e}") from None
    text = meta.get(AVRO_SCHEMA_KEY)
    if text is None:
        return None
    try:
        return json.loads(text.decode("utf-8"))
    except ValueError as e:
        raise CorruptObjectError(f"Parquet footer's {AVRO_SCHEMA_KEY.decode()} is not JSON: {e}") from None
