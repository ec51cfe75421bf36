"""Keys and headers side files a column at a time: the bytes the ``.keys`` / ``.headers`` writers write for a whole
Arrow column, built with numpy and pyarrow compute (no Python object per record).

What the record path writes, and so what these give, byte for byte (``tests/unit/test_side_columns.py`` compares them
with the record path's writers):

* Avro ``bytes``/``string`` keys: each key's datum, a zig-zag varint of its length then its bytes (a string key's
  UTF-8: the string decoder's keys are the key bytes themselves once they are valid UTF-8);
* Avro headers (:data:`lakesink.objects.formats.avro.HEADERS_SCHEMA`): per record, the array's item count, each
  header's key (string), its value's union branch (0 null, 1 string) and value, then the array's closing 0;
* JSON keys: ``"<base64>"`` of a bytes key (JsonConverter's BYTES), a string key as a JSON string;
* JSON headers: ``{"headers":[{"key":K,"value":V},...]}``, compact, as :data:`lakesink.objects.formats.jsontext.compact_json`
  writes it.

A header value is written as its UTF-8 text (the record path decodes it with U+FFFD for invalid sequences): a
column with a value that is not valid UTF-8, a record with no headers (null or empty list: the record path rejects
it) or a null key gives None here, and the caller hands the batch to the record path, which names the record at
fault. JSON text that needs an escape (a quote, a backslash, a control character) is encoded a value at a time by
the record path's own encoder.

lakesink-native's kernels (:mod:`lakesink.objects.formats.native`) build the same bytes in one pass each when they
are installed; the functions here are their twins, and run without them.

Read back the same way: :func:`json_key_column` gives a JSON keys file's keys as record bytes a column at a time
when every line is a JSON string without an escape (or ``null``), None otherwise (the caller reads record by
record).
"""
from __future__ import annotations

from typing import Any

from lakesink.objects.formats import native

__all__ = ["varint_array", "avro_bytes_datums", "avro_headers_datums", "headers_parts", "json_key_lines",
           "json_header_lines", "b64_array", "header_lists", "b64_decode_array", "json_key_column"]


def _large(values: Any) -> Any:
    """``values`` (binary/string, large or not) as large_binary (a cast of the offsets only)."""
    import pyarrow as pa

    if pa.types.is_large_binary(values.type):
        return values
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = values.view(pa.binary() if pa.types.is_string(values.type) else pa.large_binary())
    return values.cast(pa.large_binary())


def _from_offsets(offsets: Any, data: Any) -> Any:
    import pyarrow as pa

    return pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def varint_array(z: Any, present: Any = None, lead: Any = None) -> Any:
    """A large_binary array holding, per element of the uint64 numpy array ``z``, its base-128 varint (Avro's
    encoding of a long after zig-zag), preceded by the byte ``lead[i]`` when ``lead`` (uint8) is given; an element
    where ``present`` (bool) is False holds only its lead byte (or nothing)."""
    import numpy as np

    n = len(z)
    lengths = np.ones(n, np.int64)
    for k in range(1, 10):
        more = z >= np.uint64(1 << (7 * k))
        if not more.any():
            break
        lengths += more
    if present is not None:
        lengths = np.where(present, lengths, 0)
    extra = 0 if lead is None else 1
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths + extra, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    starts = offsets[:-1]
    if lead is not None:
        out[starts] = lead
        starts = starts + 1
    top = int(lengths.max()) if n else 0
    for k in range(top):
        if k == 0 and present is None:
            zz, ll, pos = z, lengths, starts
        else:
            idx = np.flatnonzero(lengths > k)
            zz, ll, pos = z[idx], lengths[idx], starts[idx]
        byte = ((zz >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        byte |= (ll > k + 1).astype(np.uint8) << np.uint8(7)
        out[pos + k] = byte
    return _from_offsets(offsets, out)


def _lengths(values: Any) -> Any:
    import numpy as np
    import pyarrow.compute as pc

    return pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def _join(*parts: Any) -> Any:
    """Element-wise concatenation of large_binary arrays and constant ``bytes`` (the same in every element; at least
    one part is an array). pyarrow's function takes the separator last: empty here. A constant goes in as a scalar,
    not as an array of ``n`` copies the kernel would read element by element."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(*(pa.scalar(p, pa.large_binary()) if isinstance(p, bytes) else p
                                         for p in parts), pa.scalar(b"", pa.large_binary()))


def avro_bytes_datums(values: Any) -> Any:
    """The Avro ``bytes``/``string`` datum of each element of ``values`` (binary or string, no nulls)."""
    import numpy as np

    values = _large(values)
    got = native.avro_bytes_datums(values)
    if got is not None:
        return got
    return _join(varint_array((_lengths(values) * 2).astype(np.uint64)), values)


def headers_parts(headers: Any) -> tuple[Any, Any, Any] | None:
    """A headers column (list<struct<key: string, value: binary>>) as (counts per record (numpy int64), keys
    (large_binary, UTF-8), values (large_binary, null for a null value)); None when some record has no headers
    (null or empty list), a key is null or a value is not valid UTF-8."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if headers.null_count:
        return None
    counts = pc.list_value_length(headers).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(counts) and counts.min() < 1:
        return None
    entries = headers.flatten()
    if entries.null_count:
        return None
    keys, values = entries.flatten()  # the struct's children, its slice applied
    if keys.null_count:
        return None
    try:
        if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
            values.cast(pa.string() if pa.types.is_binary(values.type) else pa.large_string())  # validates UTF-8
        if pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type):
            keys.cast(pa.string() if pa.types.is_binary(keys.type) else pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return counts, _large(keys), _large(values)


def _per_record(counts: Any, entries: Any, before: bytes | Any, between: bytes, after: bytes) -> Any:
    """Per record: ``before`` (bytes, or a large_binary array with one element per record), its entries joined
    with ``between``, then ``after``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), entries)
    body = pc.binary_join(lists, pa.scalar(between, pa.large_binary()))
    return _join(before, body, after)


def avro_headers_datums(headers: Any) -> Any | None:
    """The Avro datum (:data:`~lakesink.objects.formats.avro.HEADERS_SCHEMA`) of each record's headers, or None
    (see :func:`headers_parts`)."""
    parts = headers_parts(headers)
    if parts is None:
        return None
    return avro_headers_from_parts(*parts)


def avro_headers_from_parts(counts: Any, keys: Any, values: Any) -> Any:
    """:func:`avro_headers_datums` of a headers column given as :func:`headers_parts` gives it."""
    import numpy as np

    got = native.avro_headers(counts, keys, values)
    if got is not None:
        return got

    if values.null_count:
        present = ~values.is_null().to_numpy(zero_copy_only=False)
        branch = np.where(present, 2, 0).astype(np.uint8)
        values = values.fill_null(b"")
    else:  # every value a string: branch 1 and the length (no varint of a null to leave out)
        present, branch = None, np.full(len(values), 2, np.uint8)
    entries = _join(varint_array((_lengths(keys) * 2).astype(np.uint64)), keys,
                    varint_array((_lengths(values) * 2).astype(np.uint64), present, branch), values)
    return _per_record(counts, entries, varint_array((counts * 2).astype(np.uint64)), b"", b"\x00")


_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_array(values: Any) -> Any:
    """The standard base64 (with ``=`` padding) of each element of ``values`` (binary, no nulls), as large_binary:
    each element zero-filled to a multiple of 3 bytes (pyarrow), the whole run encoded at once (binascii), then
    each padded element's last one or two characters made ``=``."""
    import binascii

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakesink.objects.formats.base import binary_run

    values = _large(values)
    rem = _lengths(values) % 3
    if rem.any():
        fill = pa.array([b"", b"\x00\x00", b"\x00"], pa.large_binary())  # by length % 3
        values = _join(values, pc.take(fill, pa.array(rem)))
    data, ends = binary_run(values)
    out = np.frombuffer(bytearray(binascii.b2a_base64(data, newline=False)), np.uint8)
    oends = ends // 3 * 4
    out[oends[rem == 1] - 1] = ord("=")
    out[oends[rem == 1] - 2] = ord("=")
    out[oends[rem == 2] - 1] = ord("=")
    offsets = np.zeros(len(oends) + 1, np.int64)
    offsets[1:] = oends
    return _from_offsets(offsets, out)


def _needs_escape(values: Any) -> bool:
    """Whether some byte of ``values`` (large_binary) is one JSON must escape (``"``, ``\\``, a control)."""
    import numpy as np

    from lakesink.objects.formats.base import binary_run

    data, _ends = binary_run(values)
    if not len(data):
        return False
    buf = np.frombuffer(data, np.uint8)
    return bool(((buf < 0x20) | (buf == 0x22) | (buf == 0x5C)).any())


def _quoted(values: Any) -> Any:
    return _join(b'"', values, b'"')


def json_key_lines(keys: Any, base64: bool) -> Any | None:
    """The line the JSON writer writes for each key of ``keys`` (binary, no nulls): ``base64`` (the bytes
    decoder): the JSON string of its base64; else (the string decoder) the key's text as a JSON string. A
    large_binary array of the UTF-8 lines (a list of str when some key needs an escape), which
    ``JsonWriter.write_payloads`` takes as it is. None when some key is not valid UTF-8 (string keys): the string
    decoder rejects it on the record path."""
    import pyarrow as pa

    from lakesink.objects.formats.jsontext import compact_json

    keys = _large(keys)
    if base64:
        got = native.json_base64_strings(keys)
        return _quoted(b64_array(keys)) if got is None else got
    try:
        text = keys.cast(pa.large_string())
    except pa.ArrowInvalid:
        return None
    if _needs_escape(keys):
        return [compact_json(k) for k in text.to_pylist()]
    return _quoted(keys)


def json_header_lines(headers: Any) -> Any | None:
    """The line the JSON writer writes for each record's headers (as :func:`json_key_lines` gives them), or None
    (see :func:`headers_parts`)."""
    from lakesink.objects.formats.jsontext import compact_json

    parts = headers_parts(headers)
    if parts is None:
        return None
    counts, keys, values = parts
    got = native.json_headers(counts, keys, values)
    if got is not None:
        return got
    if _needs_escape(keys) or _needs_escape(values.fill_null(b"")):
        return [compact_json({"headers": [{"key": k, "value": v} for k, v in pairs]})
                for pairs in header_lists(counts, keys, values)]
    if values.null_count:
        value = _join(b'"', values, b'"').fill_null(b"null")
        entries = _join(b'{"key":"', keys, b'","value":', value, b"}")
    else:  # every value a string: quoted in the same pass
        entries = _join(b'{"key":"', keys, b'","value":"', values, b'"}')
    return _per_record(counts, entries, b'{"headers":[', b",", b"]}")


def header_lists(counts: Any, keys: Any, values: Any) -> list[list[tuple[str, str | None]]]:
    """Each record's headers as (key, value text or None) pairs, from :func:`headers_parts`' columns."""
    import pyarrow as pa

    ks = keys.cast(pa.large_string()).to_pylist()
    vs = values.cast(pa.large_string()).to_pylist()
    out, pos = [], 0
    for c in counts.tolist():
        out.append(list(zip(ks[pos:pos + c], vs[pos:pos + c])))
        pos += c
    return out


_B64_VALUES = None


def _b64_lut() -> Any:
    import numpy as np

    global _B64_VALUES
    if _B64_VALUES is None:
        lut = np.full(256, 255, np.uint8)
        lut[np.frombuffer(_B64, np.uint8)] = np.arange(64, dtype=np.uint8)
        lut[ord("=")] = 0
        _B64_VALUES = lut
    return _B64_VALUES


def b64_decode_array(texts: Any) -> Any | None:
    """Each element of ``texts`` (binary, no nulls: standard base64 with ``=`` padding) decoded, as large_binary;
    None when some element is not canonical padded base64 (a length not a multiple of 4, a character outside the
    alphabet, ``=`` other than as the last one or two characters): the caller decodes those one at a time."""
    import numpy as np

    from lakesink.objects.formats.base import binary_run

    texts = _large(texts)
    data, ends = binary_run(texts)
    n = len(ends)
    lens = np.diff(ends, prepend=0)
    if (lens % 4).any():
        return None
    src = np.frombuffer(data, np.uint8) if len(data) else np.zeros(0, np.uint8)
    vals = _b64_lut()[src]
    if (vals == 255).any():
        return None
    full = lens > 0
    last = ends[full] - 1
    pads = np.zeros(n, np.int64)
    pads[full] = (src[last] == ord("=")).astype(np.int64) + (src[last - 1] == ord("=")).astype(np.int64)
    if int((src == ord("=")).sum()) != int(pads.sum()) or ((pads == 1) & full).any() and \
            (src[ends[(pads == 1)] - 2] == ord("=")).any():
        return None  # '=' inside an element (each element's last one or two characters are its only padding)
    g = vals.reshape(-1, 4).astype(np.uint32)
    word = (g[:, 0] << 18) | (g[:, 1] << 12) | (g[:, 2] << 6) | g[:, 3]
    out = np.empty((len(word), 3), np.uint8)
    out[:, 0] = (word >> 16) & 0xFF
    out[:, 1] = (word >> 8) & 0xFF
    out[:, 2] = word & 0xFF
    out = out.reshape(-1)
    dends = ends // 4 * 3  # each element's end in ``out`` before its padding bytes are dropped
    keep = np.ones(len(out), bool)
    keep[dends[pads >= 1] - 1] = False
    keep[dends[pads == 2] - 2] = False
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens // 4 * 3 - pads, out=offsets[1:])
    return _from_offsets(offsets, out[keep])


def json_key_column(lines: Any, base64: bool) -> Any | None:
    """The keys of a JSON keys file as record bytes (large_binary, null for a ``null`` line) from its ``lines``
    (binary, as archived): ``base64`` (the bytes decoder) each JSON string's base64 decoded, else (the string
    decoder) its text's UTF-8. None unless every line is ``null`` or a JSON string without an escape (a backslash):
    the record path reads those."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakesink.objects.formats.base import binary_run

    lines = _large(lines)
    if lines.null_count:
        return None
    data, ends = binary_run(lines)
    buf = np.frombuffer(data, np.uint8) if len(data) else np.zeros(0, np.uint8)
    if (buf == 0x5C).any():
        return None
    lens = np.diff(ends, prepend=0)
    starts = ends - lens
    null = np.array(pc.equal(lines, pa.scalar(b"null", pa.large_binary())).to_numpy(zero_copy_only=False), bool)
    text = ~null
    if (lens[text] < 2).any() or (buf[starts[text]] != 0x22).any() or (buf[ends[text] - 1] != 0x22).any():
        return None
    inner = pc.binary_slice(pc.filter(lines, pa.array(text)), 1, -1)
    if base64:
        inner = b64_decode_array(inner)
        if inner is None:
            return None
    inner = _large(inner)
    if not null.any():
        return inner
    # nulls back in their places: each text line's value in order, a null at each ``null`` line
    if not text.any():
        return pa.nulls(len(lines), pa.large_binary())
    idx = np.cumsum(text) - 1
    return pc.take(inner, pa.array(np.where(null, 0, idx), mask=null))
