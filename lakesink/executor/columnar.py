"""The executor's columnar fast path: whole Arrow batches from Spark, no per-record Python objects.

When rotation is a pure function of record counts (Default partitioner) or of counts and the records' own
timestamps (daily, hourly, TimeBasedPartitioner with ``timestamp.extractor=Record``: the files are cut from the
batch's timestamp column, :meth:`~lakesink.objects.rotation.Rotator.process_time_run`, each timestamp's encoded
partition computed once per distinct bucket,
:meth:`~lakesink.objects.partitioners.TimeBasedPartitioner.record_time_buckets`), with no scheduled rotation and
``behavior.on.null.values`` fail or ignore, keys are either not stored (then ``key.decoder=bytes``) or stored in
a keys file whose format takes them a column at a time (``Format.columnar_keys``: Avro and JSON for the bytes and
string decoders, ByteArray for bytes) and headers, when stored, go to a format that takes them a column at a time
(Avro, JSON: ``Format.columnar_headers``), files are cut by count (:meth:`~lakesink.objects.rotation.Rotator.process_run`)
and each format takes whole runs of payloads (``FormatWriter.write_payloads``):

* ``bytes`` — ``value.decoder=bytes``, format bytearray: the values themselves;
* ``avro``  — bare Avro values (fixed ``value.schema``, no wire header), format avro: the datums,
  copied into container blocks. Each must be exactly one datum of the schema; Spark checks it in
  the JVM while reading (``to_avro(from_avro(value)) = value``: a canonical datum with nothing
  after it), far cheaper than decoding in Python; under the direct reader (no JVM column) the whole
  Arrow column is walked against the schema at once (:mod:`lakesink.schemas.avro_check`);
* ``avro_wire`` — Confluent wire-format Avro values resolved through the Schema Registry, format avro:
  an Arrow batch whose values all carry one schema id and are each exactly one datum of it (the column
  walked against the registry schema at once, :mod:`lakesink.schemas.avro_check`, or decoded with the
  record path's own reader for a schema that walk does not take) is a run of that registry schema; its datums, after the
  5-byte prefix, are copied into container blocks as the record path copies them. A batch mixing schema
  ids, or a run whose schema is not the open file's (rotation, projection under
  ``schema.compatibility``), takes the record path;
* ``parquet`` — bare Avro values, format parquet, a schema Spark decodes to exactly the values the
  record path writes (:func:`spark_decodes_alike`): Spark decodes them (``from_avro``) during the read,
  with the same canonical check, and the rows arrive as Arrow columns the writer casts to the file's schema;
  under the direct reader (no JVM column) the whole Arrow column is decoded into Arrow columns at once
  (:mod:`lakesink.schemas.avro_arrow`), as strict as the record path's decode;
* ``json``  — ``value.decoder=json``, format json: each value parsed; one already in the form the
  writer would re-encode it to is copied, the others re-encoded by the record path's own calls
  (:func:`lakesink.objects.formats.json.value_column`), without building records.

The keys and headers side files take the batch's ``key`` and ``headers`` columns, encoded a column at a time by
their formats (``Format.key_payloads`` / ``Format.header_payloads``, :mod:`lakesink.objects.formats.side_columns`).

A batch the fast path cannot vouch for (a null value or timestamp, a null key or a record without headers when
they are stored, a datum that is not canonical,
invalid JSON, offsets out of order, a Spark partition mixing Kafka partitions) goes through the
record path instead, which handles it or names the record at fault. Both paths write byte-identical
objects and manifest rows, so batches of either kind share files.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.wiring import TaskParts

log = logging.getLogger("lakesink.executor.columnar")

#: the Spark column holding the JVM's canonical-Avro check (``avro``, ``parquet`` plans)
CANONICAL = "_lakesink_canonical_avro"
#: the Spark column holding the decoded value (``parquet`` plans)
DECODED = "_lakesink_decoded"

_PRIMITIVES = ("boolean", "int", "long", "float", "double", "bytes", "string")


def spark_decodes_alike(avro: Any) -> bool:
    """Whether Spark's ``from_avro`` gives, for this record schema, the very values the record path
    writes to Parquet once cast to the file's Arrow schema: records, arrays, ``[null, X]`` unions and
    primitives, without logical types (Spark turns those into timestamps/decimals of other units),
    enums, fixed, maps or named-type references."""
    def alike(s: Any) -> bool:
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            return len(s) == 2 and len(branches) == 1 and alike(branches[0])
        if isinstance(s, str):
            return s in _PRIMITIVES
        if not isinstance(s, dict) or "logicalType" in s:
            return False
        t = s.get("type")
        if isinstance(t, (dict, list)):
            return alike(t)
        if t == "record":
            return all(alike(f.get("type")) for f in s.get("fields", []))
        if t == "array":
            return alike(s.get("items"))
        return t in _PRIMITIVES

    return isinstance(avro, dict) and avro.get("type") == "record" and alike(avro)


@dataclass(frozen=True)
class ColumnarPlan:
    """Which columnar path a config takes (``for_config``), built alike on driver and executors."""

    kind: str  # bytes | avro | avro_wire | parquet | json
    schema_json: str | None = None  # avro, parquet: the value schema, for Spark's check and decode
    #: avro and parquet without the JVM's columns (the direct reader): each batch's datums are checked in
    #: Python instead (a column at a time: lakesink.schemas.avro_check; parquet: decoded by
    #: lakesink.schemas.avro_arrow)
    python_check: bool = False
    #: the keys / headers side files are written a column at a time too (store.kafka.keys / store.kafka.headers:
    #: :meth:`side_payloads`)
    keys: bool = False
    headers: bool = False

    def for_direct_reader(self) -> "ColumnarPlan":
        """This plan for batches read by the executors themselves (no JVM columns): ``avro`` checks its
        datums in Python (each exactly one datum of the schema: the column walked at once by
        :mod:`lakesink.schemas.avro_check`, or decoded by the record path's decoder where that walk does not
        go; the datums are then copied, as the record path copies them); ``parquet`` decodes the column
        into Arrow columns in Python (:mod:`lakesink.schemas.avro_arrow`; a batch it does not decode takes
        the record path); the others need no JVM column."""
        return dataclasses.replace(self, python_check=True) if self.kind in ("avro", "parquet") else self

    @classmethod
    def for_parts(cls, parts: "TaskParts") -> "ColumnarPlan | None":
        """The plan for a run's :class:`~lakesink.wiring.TaskParts`, or None when its records need the
        per-record path."""
        from lakesink.objects.partitioners import DefaultPartitioner, TimeBasedPartitioner

        partitioner = parts.partitioner()
        if type(partitioner) is not DefaultPartitioner and not (
                isinstance(partitioner, TimeBasedPartitioner) and partitioner.encodes_record_times):
            return None
        policy = parts.rotation
        if policy.rotate_schedule_interval_ms > 0 or policy.behavior_on_null_values == "write":
            return None
        key_decoder = parts.key_decoder.name
        if parts.store_keys:  # the keys file's rule (Format.columnar_keys): a decoder that may reject a key is
            # checked a column at a time by the format (Format.key_payloads)
            if parts.keys_have_schemas or not parts.keys_format.build().columnar_keys(key_decoder):
                return None
        elif key_decoder != "bytes":
            return None
        if parts.store_headers and not parts.headers_format.build().columnar_headers():
            return None
        sides = {"keys": bool(parts.store_keys), "headers": bool(parts.store_headers)}
        dec = parts.value_decoder.build()
        kind = parts.value_format.build().columnar_kind(dec)  # the format's rule (Format.columnar_kind)
        if kind in ("avro", "parquet"):
            if kind == "parquet" and not spark_decodes_alike(dec.fixed_schema.avro):
                return None
            return cls(kind, json.dumps(dec.fixed_schema.avro), **sides)
        return None if kind is None else cls(kind, **sides)

    def side_payloads(self, columns: dict[str, Any], keys_format: Any, headers_format: Any,
                      key_decoder: str) -> dict[str, tuple[Any, Any]] | None:
        """The keys and headers side files' (payloads, schema) of one Arrow batch (``{"keys": ..., "headers":
        ...}``, only those this plan stores; empty when it stores neither), or None if the batch needs the record
        path: a null key, a key the decoder rejects, a record without headers, a header value that is not UTF-8
        (the record path names the record, or writes what it makes of it)."""
        out: dict[str, tuple[Any, Any]] = {}
        if self.keys:
            keys = columns.get("key")
            if keys is None or keys.null_count:
                return None
            got = keys_format.key_payloads(keys, key_decoder)
            if got is None:
                return None
            out["keys"] = got
        if self.headers:
            headers = columns.get("headers")
            if headers is None:
                return None
            got = headers_format.header_payloads(headers)
            if got is None:
                return None
            out["headers"] = got
        return out

    def spark_columns(self) -> list:
        """Columns the Kafka read adds for this plan (over its ``value`` column)."""
        if self.kind not in ("avro", "parquet"):
            return []
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro, to_avro

        decoded = from_avro(F.col("value"), self.schema_json, {"mode": "PERMISSIVE"})
        # PERMISSIVE turns a datum that does not decode into a row of nulls, which to_avro refuses for a
        # non-null field (AVRO_CANNOT_WRITE_NULL_FIELD, failing the task without naming the record). A valid
        # datum has a value in every non-null field, so only rows with one are re-encoded; the others are
        # "not canonical" and go to the record path, whose decoder names the record and the cause.
        required = [f["name"] for f in json.loads(self.schema_json).get("fields", [])
                    if not (isinstance(f.get("type"), list) and "null" in f["type"]) and f.get("type") != "null"]
        if required:
            decodes = functools.reduce(operator.or_, [decoded[name].isNotNull() for name in required])
            check = F.when(decodes, to_avro(decoded, self.schema_json) == F.col("value")).otherwise(F.lit(False))
        else:
            check = to_avro(decoded, self.schema_json) == F.col("value")
        canonical = check.alias(CANONICAL)
        return [canonical, decoded.alias(DECODED)] if self.kind == "parquet" else [canonical]

    def payloads(self, columns: dict[str, Any], decoder, topic: str, partition: int,
                 offsets: list[int]) -> tuple[Any, Any] | None:
        """(payloads, value schema) of one Arrow batch, or None if it needs the record path."""
        import numpy as np
        import pyarrow.compute as pc

        values = columns["value"]
        if values.null_count or columns["ts"].null_count:
            return None
        if len(offsets) > 1 and not bool(np.all(np.diff(columns["offset"].to_numpy()) > 0)):
            return None
        if self.kind == "bytes":
            return values, None
        if self.kind == "avro_wire":
            schema = decoder.wire_run(values, topic, partition, offsets[0])
            if schema is None:
                return None
            # an explicit stop: binary_slice's default (INT64_MAX) overflows its output size estimate
            longest = pc.max(pc.binary_length(values)).as_py()
            return pc.binary_slice(values, 5, longest), schema
        if self.kind in ("avro", "parquet"):
            ok = columns.get(CANONICAL)
            if ok is None and self.python_check and self.kind == "parquet":
                table = decoder.decode_fixed_column(values)  # the whole column at once
                if table is None or table is False:
                    # a bad datum (False), or a schema or array block the decoder does not take (None): the
                    # record path decodes the batch, and names the datum at fault
                    return None
                return table, decoder.fixed_schema
            if ok is None and self.python_check and self.kind == "avro":
                from lakesink.errors import DecodeError

                verdict = decoder.check_fixed(values)  # the whole column at once
                if verdict is None:
                    try:  # the record path's own decode: a bad datum goes there, which names it
                        decoder.decode_many(values.to_pylist(), topic, partition, offsets)
                    except DecodeError:
                        return None
                elif not verdict:
                    return None  # the record path names the datum at fault
                return values, decoder.fixed_schema
            if ok is None or ok.null_count or not pc.all(ok).as_py():
                return None
            if self.kind == "avro":
                return values, decoder.fixed_schema
            decoded = columns.get(DECODED)
            if decoded is None:
                return None
            import pyarrow as pa

            # Spark's Arrow types (large strings, 'element' list children); the writer casts to the file's
            return pa.Table.from_struct_array(decoded), decoder.fixed_schema
        from lakesink.objects.formats.json import value_column

        try:  # canonical values copied (the column as it is), others re-encoded; bad JSON or a null: record path
            return value_column(values), None
        except (TypeError, ValueError, OverflowError, RecursionError):
            return None


def read_columns(plan: ColumnarPlan | None, df) -> tuple[list, ColumnarPlan | None]:
    """The plan's extra Spark columns, checked against ``df``'s session; a plan whose columns
    Spark cannot build (no spark-avro on the cluster) is dropped, with a warning."""
    if plan is None:
        return [], None
    try:
        cols = plan.spark_columns()
        if cols:
            df.select(*cols).schema  # noqa: B018 - resolves the functions now, not in a task
        return cols, plan
    except Exception as e:  # noqa: BLE001 - py4j / AnalysisException
        log.warning("columnar %s path disabled, records go one by one: %s", plan.kind, str(e).splitlines()[0])
        return [], None
