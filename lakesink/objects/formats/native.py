"""lakesink's optional native JSON check (the ``lakesink-native`` package, built from ``native/`` in a checkout).

Connect's JsonConverter reads every JSON value and the sink writes it again; lakesink writes a value's own bytes
when they are exactly that round trip (:func:`lakesink.objects.formats.json.value_lines`). Proving that in Python
means parsing every value into Python objects (orjson) and serialising the batch again: most of the JSON sink's
CPU beyond copying bytes (``bench/floor.py``'s ``sink (bytearray)`` row). ``lakesink-native`` proves it for a whole
Arrow column in one pass, without an object per value. It is sound, not complete: the values it cannot prove go to
the Python check, which decides them as before; the objects written are the same either way.

Without the package, or with ``LAKESINK_NATIVE=0`` in the environment, :func:`proven_canonical` answers None and the
Python check runs alone.
"""
from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["native_check", "proven_canonical", "describe", "ENV"]

#: ``LAKESINK_NATIVE=0`` turns the native check off (both paths write the same bytes: a switch for comparisons)
ENV = "LAKESINK_NATIVE"


def _turned_off() -> bool:
    return os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off")


def describe() -> str:
    """Which JSON check runs, for ``lakesink --version``: lakesink-native's version, or why the Python check runs
    alone."""
    if _turned_off():
        return f"native JSON check off ({ENV}=0)"
    if native_check() is None:
        return "native JSON check not installed (lakesink-native: docs/install.md)"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"native JSON check: lakesink-native {version('lakesink-native')}"
    except PackageNotFoundError:  # the module on sys.path without its distribution's metadata
        return "native JSON check: lakesink-native"


@functools.cache
def native_check() -> Any:
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
    module = native_check()
    if module is None:
        return None
    import numpy as np
    import pyarrow as pa

    from lakesink.objects.formats.base import binary_run

    # a ChunkedArray or a column of another type: the Python check takes it as it is
    if not isinstance(values, pa.Array) or not (pa.types.is_binary(values.type)
                                                or pa.types.is_large_binary(values.type)):
        return None
    data, ends = binary_run(values)  # this slice's bytes, and each value's end counted from their start
    offsets = np.zeros(len(ends) + 1, np.int64)
    offsets[1:] = ends
    mask = module.proven_mask(bytes(data), offsets.tobytes())
    return np.frombuffer(mask, np.uint8).astype(bool)
