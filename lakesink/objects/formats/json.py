"""Newline-delimited JSON (Confluent ``JsonFormat``; spec §2, §5).

One value per line, ``\\n`` after every record including the last, compact separators (Jackson's
output has no spaces), non-ASCII written as UTF-8. Inside values, bytes become base64 strings
(JsonConverter's BYTES / Jackson's ``byte[]``); Avro decimals (raw unscaled bytes) follow
``decimal_format``: ``BASE64`` (default, = the bytes in base64) or ``NUMERIC`` (a JSON number, needs
the record's value_schema to find them). Raw logical ints (timestamp-millis, date) are already what
JsonConverter writes. A top-level bytes value, a NaN/Infinity, or an unserialisable object is an
EncodeError. With ``compression=gzip`` the whole object is ONE gzip member.

Copy-through (:func:`value_lines`, the executor's columnar JSON path): a value already in the exact
form this writer would re-serialise it to -- compact (no whitespace outside strings), strings with
only the escapes Python's encoder writes (``\\" \\\\ \\b \\f \\n \\r \\t``, other controls as
lowercase ``\\u00xx``, everything else raw UTF-8), integers without ``-0``, decimal-point numbers with
at most 15 significant digits written as ``repr`` writes them (no trailing zeros, no exponent, at most
three zeros after ``0.``), no repeated object key -- is copied as it is. Any other valid value
(whitespace, ``\\u00e9``/``\\/`` escapes, exponents, long or non-shortest floats, duplicate keys) is
parsed and re-encoded. Both give the same bytes (tests/unit/test_json_copy.py, test_native_json.py).

Size: the writer and the copy-through checks it relies on (value_column, value_lines) stay together, as one
definition of the bytes this format writes.

Known differences from Jackson: doubles print as Python ``repr`` (``1e+16`` where Java prints
``1.0E16``); non-optional Avro unions are written as the bare branch value, not Connect's
``{"branch": value}`` struct.
"""
from __future__ import annotations

import decimal
import gzip
import io
import json
import re
import secrets
from bisect import bisect_left
from itertools import accumulate, compress
from typing import Any, BinaryIO, Iterator, Sequence

from lakesink.objects.records import SinkRecord
from lakesink.schemas.avro import value_converter
from lakesink.objects.formats.base import (DEFAULT_BUFFER_SIZE, Format, FormatWriter, RecordView, encode_error, header_pairs,
                   record_key)
from lakesink.objects.formats.compression import CompressingSink, parse_compression
from lakesink.objects.formats.jsontext import compact_json, json_default
from lakesink.objects.formats.native import proven_canonical
from lakesink.errors import InvalidArgumentError

DECIMAL_FORMATS = ("BASE64", "NUMERIC")


class JsonFormat(Format):
    """``json`` format: options ``compression`` (none|gzip), ``compression_level`` (-1..9),
    ``decimal_format`` (BASE64|NUMERIC), ``buffer_size`` (bytes collected before a push)."""

    name = "json"
    reads_object_compression = True
    takes_s3_compression = True
    record_bytes_rule = "the archived line (UTF-8)"
    keys_as_base64 = True

    @classmethod
    def options_from(cls, settings: Any) -> dict[str, Any]:
        return {"compression": settings.s3_compression_type, "compression_level": settings.s3_compression_level}

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> Any:
        """The lines as archived (UTF-8, without newlines); ``value_decoder="string"``: a JSON string's text
        (the archive wrote a string value as a JSON string)."""
        if value_decoder == "string":
            lines = list(self.read_lines(io.BytesIO(data)))
            return [json.loads(x).encode("utf-8") if x[:1] == b'"' else x for x in lines]
        return self.read_lines_array(io.BytesIO(data))

    def columnar_keys(self, key_decoder: str) -> bool:
        return key_decoder in ("bytes", "string")

    def columnar_headers(self) -> bool:
        return True

    def key_bytes(self, data: bytes, key_decoder: str) -> Any:
        """A column at a time when every line is a JSON string without an escape or ``null`` (what the sink
        writes for bytes and string keys: :func:`~lakesink.objects.formats.side_columns.json_key_column`), else
        record by record."""
        if key_decoder in ("bytes", "string"):
            from lakesink.objects.formats.side_columns import json_key_column

            col = json_key_column(self.read_lines_array(io.BytesIO(data)), base64=key_decoder == "bytes")
            if col is not None:
                return col
        return super().key_bytes(data, key_decoder)

    def key_payloads(self, keys: Any, key_decoder: str) -> tuple[Any, Any] | None:
        """Each key's line: a bytes key's base64 as a JSON string (JsonConverter's BYTES), a string key's text."""
        from lakesink.objects.formats.side_columns import json_key_lines

        lines = json_key_lines(keys, base64=key_decoder == "bytes")
        return None if lines is None else (lines, None)

    def header_payloads(self, headers: Any) -> tuple[Any, Any] | None:
        from lakesink.objects.formats.side_columns import json_header_lines

        lines = json_header_lines(headers)
        return None if lines is None else (lines, None)

    def columnar_kind(self, decoder: Any) -> str | None:
        if decoder.name == "json" and not decoder.envelope and self.decimal_format == "BASE64":
            return "json"
        return None

    def __init__(self, compression: str | None = "none", compression_level: int = -1,
                 decimal_format: str = "BASE64", buffer_size: int = DEFAULT_BUFFER_SIZE):
        self.compression = parse_compression(compression)
        self.compression_level = int(compression_level)
        if not -1 <= self.compression_level <= 9:
            raise InvalidArgumentError(f"compression_level {compression_level} is outside -1..9")
        self.decimal_format = str(decimal_format).upper()
        if self.decimal_format not in DECIMAL_FORMATS:
            raise InvalidArgumentError(f"decimal_format {decimal_format!r} not in {list(DECIMAL_FORMATS)}")
        self.buffer_size = int(buffer_size)
        self.extension = ".json" + (".gz" if self.compression == "gzip" else "")

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE) -> "JsonWriter":
        return JsonWriter(self, out, self._check_view(view))

    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[Any]:
        """Yield parsed values (KEYS: bytes keys come back as their base64 strings;
        HEADERS: lists of (key, value) tuples)."""
        view = RecordView(view)
        src = gzip.GzipFile(fileobj=stream, mode="rb") if self.compression == "gzip" else stream
        loads = json.loads
        for line in src:
            if line.strip():
                v = loads(line)
                yield [(h["key"], h["value"]) for h in v["headers"]] if view is RecordView.HEADERS else v

    def read_lines(self, stream: BinaryIO) -> Iterator[bytes]:
        """Yield each record's line as archived (UTF-8 bytes, without the newline): what restore produces."""
        src = gzip.GzipFile(fileobj=stream, mode="rb") if self.compression == "gzip" else stream
        yield from _lines(src.read())

    def read_lines_array(self, stream: BinaryIO) -> Any:
        """:meth:`read_lines` as one pyarrow binary array, the lines found with numpy (no bytes object per
        line) when the object is what the sink writes: no blank lines, none starting with whitespace."""
        import numpy as np
        import pyarrow as pa

        src = gzip.GzipFile(fileobj=stream, mode="rb") if self.compression == "gzip" else stream
        data = src.read()
        buf = np.frombuffer(data, np.uint8)
        newline = buf == 10
        ends = np.flatnonzero(newline)
        if len(buf) and buf[-1] != 10:
            ends = np.append(ends, len(buf))  # a last line without its newline
        starts = np.zeros(len(ends), np.int64)
        starts[1:] = ends[:-1] + 1
        lengths = ends - starts
        # a blank or whitespace-led line (never written by the sink): read_lines' rules, a line at a time
        if len(ends) and (not lengths.all() or np.isin(buf[starts], _WHITESPACE).any()):
            return pa.array(_lines(data), pa.binary())
        offsets = np.zeros(len(ends) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= 2 ** 31:  # past 32-bit offsets: Arrow's own conversion (chunked)
            return pa.array(_lines(data), pa.binary())
        return pa.Array.from_buffers(pa.binary(), len(ends), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                              pa.py_buffer(buf[~newline])])


def _lines(data: bytes) -> list[bytes]:
    """The non-blank lines of ``data``, without their newlines."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    if all(lines) and not any(map(bytes.isspace, lines)):  # what the sink writes: no blank lines
        return lines
    return [line for line in lines if line.strip()]


#: bytes ``bytes.isspace`` counts as whitespace
_WHITESPACE = list(b" \t\n\r\x0b\x0c")


def _plain_values(values: list) -> bool:
    """True if no value is null or bytes (the values write() rejects before encoding)."""
    return not any(t is type(None) or issubclass(t, (bytes, bytearray, memoryview)) for t in set(map(type, values)))


_STRING = r'"(?:[^"\\\x00-\x1f]++|\\["\\\\bfnrt]|\\u000[0-7bef]|\\u001[0-9a-f])*+"'
#: a float whose ``repr`` is itself: <= 15 significant digits (so no shorter string reads back as the
#: same double), no trailing zero, fixed notation where repr uses it (1e-4 <= |x| < 1e16)
_FLOAT = r'-?(?=[0-9.]{3,16}(?![0-9.]))(?:[1-9][0-9]*+\.(?:[0-9]*[1-9]|0)|0\.(?:0{0,3}[1-9](?:[0-9]*[1-9])?|0))'
_INT = r'(?:-?[1-9][0-9]*+|0)'
#: a whole text of the tokens :data:`compact_json` writes, nothing between them
_CANONICAL = re.compile(r'(?:' + _STRING + '|' + _FLOAT + r'(?![0-9.eE])|' + _INT + r'(?![0-9.eE])'
                        r'|true|false|null|[\[\]{},:])*+').fullmatch


_DUPLICATE_KEY = "duplicate key"  # a marker, not a user-facing error: the caller re-encodes the value


def _unique_pairs(pairs: list) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError(_DUPLICATE_KEY)  # json.loads keeps the last: the re-encoded text would differ
    return d


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


_checked_loads = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant).decode
_plain_loads = json.JSONDecoder(parse_constant=_reject_constant).decode


def is_canonical(text: str) -> bool:
    """Whether ``text`` (a valid JSON text) is, token for token, what :data:`compact_json` writes for
    its parsed value -- duplicate keys aside, which :func:`value_lines` checks while parsing."""
    return _CANONICAL(text) is not None


# orjson parses and re-serialises a value several times faster than the json module (bench/json_copy.py)
from orjson import dumps as _orjson_dumps, loads as _orjson_loads  # noqa: E402

#: In orjson's output, the only number forms that differ from Python's ``repr`` (what :data:`compact_json`
#: writes): |x| < 1e-4, written ``0.0000…`` or ``…e-N`` with a one-digit exponent (repr: ``…e-0N``). A text
#: holding either anywhere (strings included: a false alarm only costs the slower check) is not copied on
#: orjson's word. Checked over 1.3M random doubles and the boundaries (tests/unit/test_json_copy.py).
#: (:func:`value_lines` tests ``b"0.0000"`` and ``b"e-"`` as substrings first: a regex scan of every value costs
#: more than the whole orjson round trip.)
#: (Written ``e-`` first, the digit before it a lookbehind: a pattern that starts with a literal is searched for
#: that literal, ~13x faster over a long text than one that starts with a character class.)
_ORJSON_E = re.compile(rb"e-[0-9](?![0-9])(?<=[0-9]e-[0-9])").search


def value_column(values: Any) -> Any:
    """:func:`value_lines` of a pyarrow binary column without nulls (the columnar path): the column itself when
    every value is copied through -- :meth:`JsonWriter.write_payloads` writes it as it stands, with no str per
    line --, else the list of lines. The native check (:mod:`~lakesink.objects.formats.native`), when installed,
    proves values first: Python parses only the others."""
    proven = proven_canonical(values)
    if proven is not None and proven.all():
        return values
    raws = values.to_pylist()
    rest = raws if proven is None else list(compress(raws, ~proven))
    try:
        parsed = list(map(_orjson_loads, rest))
    except (ValueError, TypeError):  # some value orjson cannot read: value_lines decides each one
        return value_lines(raws)
    if _all_copied(rest, parsed):
        return values
    if proven is None:
        return value_lines(raws, parsed)
    lines = iter(value_lines(rest, parsed))
    return [raw.decode("utf-8") if ok else next(lines) for raw, ok in zip(raws, proven.tolist())]


def value_lines(raws: Sequence[bytes], parsed: list | None = None) -> list[str]:
    """The line :class:`JsonWriter` writes (VALUE view, BASE64 decimals) for each raw JSON value:
    the value's own text when it is already canonical (copy-through), else ``compact_json`` of its
    parse. Raises ValueError (or TypeError) for a value that is not UTF-8 JSON, is JSON ``null``,
    or cannot be written (NaN/Infinity), so the caller hands the batch to the record path. ``parsed``: orjson's
    parse of every raw value, when the caller has it.

    A value is canonical when orjson's serialisation of its parse is the value itself and holds no number form
    where orjson and :data:`compact_json` differ (``0.0000`` or :data:`_ORJSON_E`): then ``compact_json`` of the parse
    is the value too. Anything else (whitespace, escapes, duplicate keys, integers beyond 64 bits -- which
    orjson reads as floats --, those number forms) takes the json-module path: the :data:`_CANONICAL` token
    check, else parse and re-encode.

    The whole column is tried first (:func:`_all_copied`); a value at a time only when some value is not
    canonical."""
    values: list | None = parsed
    if values is None:
        try:
            values = list(map(_orjson_loads, raws))
        except (ValueError, TypeError):  # some value orjson cannot read: each one is decided below
            values = None
        else:
            if _all_copied(raws, values):
                try:
                    return list(map(bytes.decode, raws))
                except TypeError:  # a value given as bytearray/memoryview: the per-value path converts it
                    pass
    out = []
    append = out.append
    canonical = _CANONICAL
    oloads, odumps, exp = _orjson_loads, _orjson_dumps, _ORJSON_E
    for i, raw in enumerate(raws):
        if not isinstance(raw, bytes):
            raw = bytes(raw)
        if values is not None:
            v, parsed_ok = values[i], True
        else:
            try:
                v, parsed_ok = oloads(raw), True
            except ValueError:  # orjson.JSONDecodeError: the json module decides (and names the problem)
                parsed_ok = False
        if parsed_ok and v is not None and odumps(v) == raw and b"0.0000" not in raw and (
                b"e-" not in raw or exp(raw) is None):
            append(raw.decode("utf-8"))
            continue
        text = raw.decode("utf-8")
        if canonical(text) is not None:
            try:
                v = _checked_loads(text)
            except ValueError as e:
                if e.args != (_DUPLICATE_KEY,):
                    raise
                append(compact_json(_plain_loads(text)))
                continue
            if v is None:
                raise ValueError("null value")
            append(text)
        else:
            v = _plain_loads(text)
            if v is None:
                raise ValueError("null value")
            append(compact_json(v))
    return out


def _all_copied(raws: Sequence[bytes], values: list) -> bool:
    """Whether every value passes :func:`value_lines`' copy-through test, decided with one orjson serialisation
    of all the parsed ``values`` instead of one per value.

    Why the whole is enough: ``raws`` joined by commas inside brackets is a text S holding each raw value
    verbatim. If S is orjson's serialisation of ``values`` -- no whitespace outside strings -- then, each raw being
    a complete JSON text, reading S from the start meets exactly ``raws[0]``, then its comma, and so on: the
    boundaries line up, so each value's own serialisation is its raw text. The number-form substrings cannot
    straddle a boundary (commas separate the values), so testing them on the joined text tests every value."""
    try:
        joined = b",".join(raws)
    except TypeError:  # not bytes-like
        return False
    dumped = _orjson_dumps(values)
    # S compared in place (startswith at 1), not built: a copy of the column's bytes is a large fresh buffer
    return (len(dumped) == len(joined) + 2 and dumped.startswith(joined, 1) and None not in values
            and b"0.0000" not in joined and (b"e-" not in joined or _ORJSON_E(joined) is None))


class JsonWriter(FormatWriter):
    def __init__(self, fmt: JsonFormat, out: BinaryIO, view: RecordView):
        super().__init__(out, view)
        self._fmt = fmt
        self._numeric = fmt.decimal_format == "NUMERIC"
        self._marker = "\x00" + secrets.token_hex(6) + ":"  # NUMERIC decimals, replaced after encoding
        self._marker_re = re.compile('"' + re.escape(json.dumps(self._marker)[1:-1]) + '([^"]*)"')
        self._converters: dict[str, Any] = {}
        self._encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                        check_circular=False, default=self._default).encode
        self._lines: list[str] = []  # lines not yet pushed, after the pieces in _out
        self._out: list[Any] = []  # encoded pieces (bytes-like, each line with its newline) before them
        self._pending = 0  # characters (not bytes) since the last push, as write() counts them
        self._gz = CompressingSink(self._sink, "gzip", fmt.compression_level) if fmt.compression == "gzip" else None

    def _default(self, o: Any) -> Any:
        if self._numeric and isinstance(o, decimal.Decimal):
            return self._marker + str(o)
        return json_default(o)

    def _numeric_converter(self, record: SinkRecord):
        vs = record.value_schema
        if vs is None:
            return None
        try:
            return self._converters[vs.fingerprint]
        except KeyError:
            def leaf(node):
                if node.get("logicalType") == "decimal" and node.get("type") in ("bytes", "fixed"):
                    scale, marker = int(node.get("scale", 0)), self._marker

                    def conv(v):
                        if isinstance(v, (bytes, bytearray)):
                            return marker + str(decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale))
                        return v
                    return conv
                return None

            c = self._converters[vs.fingerprint] = value_converter(vs.avro, leaf)
            return c

    def write(self, record: SinkRecord) -> None:
        view = self.view
        if view is RecordView.VALUE:
            value = record.value
            if value is None:
                raise encode_error(record, "null value (tombstone) cannot be written to a value file")
            if isinstance(value, (bytes, bytearray, memoryview)):
                raise encode_error(record, "JSON format cannot write a bytes value (use format bytearray, "
                                           "or a string/json/avro value decoder)")
            conv = self._numeric_converter(record) if self._numeric else None
            if conv is not None:
                value = conv(value)
        elif view is RecordView.KEYS:
            value = record_key(record)
        else:
            value = {"headers": [{"key": k, "value": v} for k, v in header_pairs(record)]}
        try:
            line = self._encode(value)
        except (TypeError, ValueError, OverflowError) as e:
            raise encode_error(record, f"cannot encode value as JSON: {e}") from None
        if self._numeric and "\\u0000" in line:
            line = self._marker_re.sub(r"\1", line)
        self._lines.append(line)
        self._pending += len(line)
        self.record_count += 1
        if self._pending >= self._fmt.buffer_size:
            self._push()

    def write_many(self, records: Sequence[SinkRecord]) -> None:
        """:meth:`write` for each record: the values are encoded in one pass and the lines handed
        to the buffer in runs cut where :meth:`write` would push, so the bytes and
        ``record_count`` are exactly those of :meth:`write`. A batch that needs per-record
        handling (NUMERIC decimals, keys/headers, a value that cannot be written) goes through
        :meth:`write`, which names the bad record."""
        values = [r.value for r in records]
        if self.view is not RecordView.VALUE or self._numeric or not _plain_values(values):
            super().write_many(records)
            return
        try:
            lines = list(map(self._encode, values))
        except Exception:  # noqa: BLE001 - write() finds (and names) the record, writing those before it
            super().write_many(records)
            return
        self.write_payloads(lines)

    def write_payloads(self, payloads: Sequence[str] | Any, schema=None) -> None:
        """Columnar :meth:`write_many`: ``payloads`` are the encoded lines (without the newline), handed to
        the buffer in runs cut where :meth:`write` would push: a list of str, or a pyarrow binary/string array
        of UTF-8 lines without nulls (the side files' lines, :mod:`~lakesink.objects.formats.side_columns`:
        copied as bytes, no str per line)."""
        if not isinstance(payloads, (list, tuple)):
            self._write_line_array(payloads)
            return
        lines = payloads
        ends = list(accumulate(map(len, lines), initial=0))
        buffer, m, k = self._fmt.buffer_size, len(lines), 0
        while k < m:
            push = bisect_left(ends, ends[k] + buffer - self._pending, k + 1)  # write() pushes after line push-1
            end = min(push, m)
            self._lines.extend(lines[k:end])
            self._pending += ends[end] - ends[k]
            self.record_count += end - k
            if end == push:
                self._push()
            k = end

    def _write_line_array(self, lines: Any) -> None:
        """:meth:`write_payloads` of a pyarrow array of UTF-8 lines: the same bytes as a list of their str. Compressed,
        also the same runs and pushes, since they decide where gzip flushes (a line's length counted in characters:
        the UTF-8 bytes that do not continue a character)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from lakesink.objects.formats.base import binary_run

        m = len(lines)
        if not m:
            return
        if not pa.types.is_large_binary(lines.type):
            if pa.types.is_string(lines.type) or pa.types.is_large_string(lines.type):
                lines = lines.view(pa.binary() if pa.types.is_string(lines.type) else pa.large_binary())
            lines = lines.cast(pa.large_binary())
        nl = pa.scalar(b"\n", pa.large_binary())
        data, ends = binary_run(pc.binary_join_element_wise(lines, nl, pa.scalar(b"", pa.large_binary())))
        if self._gz is None:
            # uncompressed, where write() would push changes no byte of the object: the run goes to the sink at
            # once, after what was written before it (no per-line count, no second copy)
            self._push()
            self._sink.write(data)
            self.record_count += m
            return
        ends = np.concatenate(([0], ends))  # byte offsets of each line (its newline included) in ``data``
        buf = np.frombuffer(data, np.uint8)
        if buf.max() < 0x80:  # ASCII: a character per byte (less the newlines, one per line)
            chars = ends - np.arange(m + 1)
        else:
            starts = np.zeros(len(buf) + 1, np.int64)
            np.cumsum((buf & 0xC0) != 0x80, out=starts[1:])
            chars = starts[ends] - np.arange(m + 1)
        buffer, k = self._fmt.buffer_size, 0
        while k < m:
            # write() pushes after line push-1
            push = max(k + 1, int(np.searchsorted(chars, chars[k] + buffer - self._pending, side="left")))
            end = min(push, m)
            if self._lines:
                self._encode_lines()
            self._out.append(data[int(ends[k]):int(ends[end])])
            self._pending += int(chars[end] - chars[k])
            self.record_count += end - k
            if end == push:
                self._push()
            k = end

    def _encode_lines(self) -> None:
        self._lines.append("")  # -> a "\n" after the last line too
        self._out.append("\n".join(self._lines).encode("utf-8"))
        self._lines.clear()

    def _push(self) -> None:
        if self._lines:
            self._encode_lines()
        if not self._out:
            return
        data = b"".join(self._out)  # one piece (lines only): joined without a copy
        self._out.clear()
        self._pending = 0
        if self._gz is not None:
            self._gz.write(data)
        else:
            self._sink.write(data)

    def _finish(self) -> None:
        self._push()
        if self._gz is not None:
            self._gz.finish()  # an empty object still gets a valid (empty) gzip member
