"""lakesink's optional native kernels (the ``lakesink-native`` package, built from ``native/`` in a checkout): the one
module that calls them. Each has a Python twin that writes the same bytes; without the package, with
``LAKESINK_NATIVE=0`` in the environment, or for an input a kernel declines, the twin runs.

**The JSON check.** Connect's JsonConverter reads every JSON value and the sink writes it again; lakesink writes a
value's own bytes when they are exactly that round trip (:func:`lakesink.objects.formats.json.value_lines`). Proving
that in Python means parsing every value into Python objects (orjson) and serialising the batch again: most of the
JSON sink's CPU beyond copying bytes (``bench/floor.py``'s ``sink (bytearray)`` row). ``lakesink-native`` proves it
for a whole Arrow column in one pass, without an object per value. It is sound, not complete: the values it cannot
prove go to the Python check, which decides them as before; the objects written are the same either way.

**Keys and headers side files** (``store.kafka.keys`` / ``store.kafka.headers``). The direct reader's Arrow headers
column from confluent-kafka's ``Message.headers()`` lists (:func:`header_column`; ``pa.array`` converts each tuple),
and the side files' Avro datums and JSON lines from the Arrow columns (:func:`avro_bytes_datums`,
:func:`json_base64_strings`, :func:`avro_headers`, :func:`json_headers`; their twins in
:mod:`lakesink.objects.formats.side_columns` join pyarrow arrays element-wise, several passes per batch). Each answers
None when it does not run: the caller takes its twin.
"""
from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["native_module", "proven_canonical", "header_column", "avro_bytes_datums", "json_base64_strings",
           "avro_headers", "json_headers", "describe", "ENV"]

#: ``LAKESINK_NATIVE=0`` turns the native kernels off (both paths write the same bytes: a switch for comparisons)
ENV = "LAKESINK_NATIVE"


def _turned_off() -> bool:
    return os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off")


def describe() -> str:
    """Whether the native kernels run, for ``lakesink --version``: lakesink-native's version, or why the Python
    twins run alone."""
    if _turned_off():
        return f"native kernels off ({ENV}=0)"
    if native_module() is None:
        return "native kernels not installed (lakesink-native: docs/install.md)"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"native kernels: lakesink-native {version('lakesink-native')}"
    except PackageNotFoundError:  # the module on sys.path without its distribution's metadata
        return "native kernels: lakesink-native"


@functools.cache
def native_module() -> Any:
    """The ``lakesink_native`` module when it is installed and not turned off (:data:`ENV`), else None."""
    if _turned_off():
        return None
    try:
        import lakesink_native  # type: ignore[import-not-found]
    except ImportError:
        return None
    return lakesink_native


def proven_canonical(values: Any) -> Any:
    """Which values of ``values`` (a pyarrow binary or large_binary array without nulls) the native check proves
    canonical: a numpy bool array, one per value; None when there is no native check or the column is of another
    type."""
    module = native_module()
    if module is None:
        return None
    import numpy as np
    import pyarrow as pa

    # a ChunkedArray or a column of another type: the Python check takes it as it is
    if not isinstance(values, pa.Array) or not (pa.types.is_binary(values.type)
                                                or pa.types.is_large_binary(values.type)):
        return None
    mask = module.proven_mask(*_run(values))
    return np.frombuffer(mask, np.uint8).astype(bool)


def _kernel(name: str) -> Any:
    """lakesink-native's function ``name``, or None (not installed, turned off, or a lakesink-native older than it)."""
    module = native_module()
    return None if module is None else getattr(module, name, None)


def _run(values: Any) -> tuple[bytes, bytes]:
    """A binary / large_binary / string array without nulls (a slice too) as a kernel takes it: its bytes and n + 1
    int64 offsets counted from their start."""
    import numpy as np

    from lakesink.objects.formats.base import binary_run

    data, ends = binary_run(values)
    offsets = np.zeros(len(ends) + 1, np.int64)
    offsets[1:] = ends
    return bytes(data), offsets.tobytes()


def _large_binary(column: tuple[bytes, bytes]) -> Any:
    """A kernel's (bytes, int64 offsets) as a pyarrow large_binary array (no copy)."""
    import pyarrow as pa

    data, offsets = column
    return pa.Array.from_buffers(pa.large_binary(), len(offsets) // 8 - 1, [None, pa.py_buffer(offsets),
                                                                             pa.py_buffer(data)], null_count=0)


def header_column(hdrs: list, type_: Any) -> Any:
    """The direct reader's ``headers`` column (``type_``: list<struct<key: string, value: binary>>) of a batch's
    ``Message.headers()`` (None or a list of (str, bytes or None) per record), as
    :func:`lakesink.executor.kafka_reader.headers_column` builds it; None without the kernel or for another type or
    shape of input."""
    import pyarrow as pa

    kernel = _kernel("header_buffers")
    entry = pa.struct([("key", pa.string()), ("value", pa.binary())])
    if kernel is None or type(hdrs) is not list or type_ != pa.list_(entry):
        return None
    try:
        listed, list_offsets, key_offsets, keys, present, value_offsets, values = kernel(hdrs)
    except (TypeError, ValueError, OverflowError):  # not confluent-kafka's shape: pa.array converts it
        return None
    m = len(key_offsets) // 4 - 1
    key = pa.Array.from_buffers(pa.string(), m, [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)], null_count=0)
    value = pa.Array.from_buffers(pa.binary(), m, [None if present is None else pa.py_buffer(present),
                                                   pa.py_buffer(value_offsets), pa.py_buffer(values)])
    entries = pa.StructArray.from_arrays([key, value], fields=list(entry))
    return pa.Array.from_buffers(type_, len(hdrs), [None if listed is None else pa.py_buffer(listed),
                                                    pa.py_buffer(list_offsets)], children=[entries])


def avro_bytes_datums(values: Any) -> Any:
    """The Avro ``bytes`` datum of each element of ``values`` (binary, large_binary or string, no nulls), as
    :func:`lakesink.objects.formats.side_columns.avro_bytes_datums`; None without the kernel."""
    kernel = _kernel("avro_bytes_datums")
    return None if kernel is None else _large_binary(kernel(*_run(values)))


def json_base64_strings(values: Any) -> Any:
    """The JSON string of each element's base64 (binary, no nulls), as
    :func:`lakesink.objects.formats.side_columns.json_key_lines` with ``base64``; None without the kernel."""
    kernel = _kernel("json_base64_strings")
    return None if kernel is None else _large_binary(kernel(*_run(values)))


def _headers_args(counts: Any, keys: Any, values: Any) -> tuple:
    """:func:`lakesink.objects.formats.side_columns.headers_parts`' columns as the headers kernels take them."""
    import numpy as np

    present = None
    if values.null_count:
        present = (~values.is_null().to_numpy(zero_copy_only=False)).astype(np.uint8).tobytes()
        values = values.fill_null(b"")
    return (np.ascontiguousarray(counts, np.int64).tobytes(), *_run(keys), *_run(values), present)


def avro_headers(counts: Any, keys: Any, values: Any) -> Any:
    """The Avro headers datum of each record from :func:`~lakesink.objects.formats.side_columns.headers_parts`'
    columns, as :func:`~lakesink.objects.formats.side_columns.avro_headers_from_parts`; None without the kernel."""
    kernel = _kernel("avro_headers")
    return None if kernel is None else _large_binary(kernel(*_headers_args(counts, keys, values)))


def json_headers(counts: Any, keys: Any, values: Any) -> Any:
    """The JSON headers line of each record from :func:`~lakesink.objects.formats.side_columns.headers_parts`'
    columns, as :func:`~lakesink.objects.formats.side_columns.json_header_lines`; None without the kernel or when some
    key or value needs a JSON escape."""
    kernel = _kernel("json_headers")
    if kernel is None:
        return None
    got = kernel(*_headers_args(counts, keys, values))
    return None if got is None else _large_binary(got)
