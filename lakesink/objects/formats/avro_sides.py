"""The keys and headers files of :class:`~lakesink.objects.formats.avro.AvroWriter` written a datum at a time (split
from :mod:`lakesink.objects.formats.avro`).

A headers file, and a keys file of bytes or string keys without a schema, never use fastavro's block buffer: each
record's datum is encoded (a column at a time, :mod:`lakesink.objects.formats.side_columns`) and copied into the
blocks as the value fast path copies its datums, cut where fastavro's ``Writer.write`` cuts them (after the datum
that brings a block to ``sync_interval`` bytes). So the record path and the columnar path (``write_payloads``) give
the bytes fastavro gave for the same records, and one file may take records from both.
"""
from __future__ import annotations

from typing import Any, Sequence

from lakesink.errors import InvalidArgumentError
from lakesink.objects.formats.base import RecordView, encode_error, header_pairs, record_key
from lakesink.objects.records import SinkRecord


class AvroSideWriting:
    """The KEYS/HEADERS part of ``AvroWriter`` (a mixin: it uses the writer's ``view``, ``_schemaless``, ``_w``,
    ``_open`` and ``_append_run``)."""

    def _datum_view(self) -> bool:
        return self.view is RecordView.HEADERS or self._schemaless in ("bytes", "string")

    def _write_view_datums(self, datums, schema: Any) -> None:
        """Columnar KEYS/HEADERS: ``datums`` (pyarrow binary, no nulls) are each one datum of the file's schema:
        the headers schema, or ``schema`` (``"bytes"``/``"string"``) for keys without a schema."""
        if self.view is RecordView.KEYS:
            if schema not in ("bytes", "string"):
                raise InvalidArgumentError(f"Avro columnar keys are bytes or string datums, not {schema!r}")
            if self._w is None:
                self._schemaless = schema
                self._open(schema, None)
            elif self._schemaless != schema:
                raise InvalidArgumentError(f"{schema} keys do not fit this keys file "
                                           f"({self._schemaless or 'a schema of its own'})")
        self._append_run(datums)

    def _write_view_records(self, records: Sequence[SinkRecord]) -> None:
        """The record path of a :meth:`_datum_view` file: the records' datums, a column at a time; on a record
        that cannot be written, those before it are written and its EncodeError raised."""
        import pyarrow as pa

        from lakesink.objects.formats.side_columns import avro_bytes_datums, avro_headers_from_parts

        keys = self.view is RecordView.KEYS
        good: list = []
        error = None
        want = (bytes, bytearray, memoryview) if self._schemaless == "bytes" else str
        for r in records:
            try:
                v = record_key(r) if keys else header_pairs(r)
            except Exception as e:  # noqa: BLE001 - EncodeError naming the record
                error = e
                break
            if keys and not isinstance(v, want):
                error = encode_error(r, f"value does not match Avro schema: a {type(v).__name__} key in a "
                                        f"{self._schemaless} keys file")
                break
            good.append(v)
        if good:
            if keys:
                col = pa.array(good, pa.binary() if self._schemaless == "bytes" else pa.string())
                datums = avro_bytes_datums(col)
            else:
                import numpy as np

                counts = np.fromiter(map(len, good), np.int64, len(good))
                flat = [h for pairs in good for h in pairs]
                datums = avro_headers_from_parts(
                    counts, pa.array([k for k, _v in flat], pa.string()).cast(pa.large_binary()),
                    pa.array([v for _k, v in flat], pa.string()).cast(pa.large_binary()))
            self._append_run(datums)
        if error is not None:
            raise error
