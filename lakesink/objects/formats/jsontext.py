"""JSON text as Connect's JsonConverter writes it: :func:`json_default` for the types ``json`` cannot encode and
:data:`compact_json`, the compact encoder every JSON writer and reader of lakesink shares. (A module of its own,
below :mod:`lakesink.objects.formats.base`, so the base format's key rule can use it without an import cycle.)"""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from typing import Any

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def b64(data: bytes) -> str:
    """Base64 text, as Connect's JsonConverter / Jackson write BYTES."""
    return base64.b64encode(data).decode("ascii")


def json_default(o: Any) -> Any:
    """What JsonConverter / Jackson write for types ``json`` can't: bytes -> base64, Decimal ->
    base64 of the unscaled bytes (BASE64 decimal format), datetime -> epoch ms, date -> days,
    time -> ms of day, UUID -> str."""
    if isinstance(o, (bytes, bytearray, memoryview)):
        return b64(bytes(o))
    if isinstance(o, decimal.Decimal):
        unscaled = int(o.scaleb(-o.as_tuple().exponent))
        return b64(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True))
    if isinstance(o, datetime.datetime):
        if o.tzinfo is None:
            o = o.replace(tzinfo=datetime.timezone.utc)
        return (o - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(o, datetime.date):
        return (o - _EPOCH.date()).days
    if isinstance(o, datetime.time):
        return ((o.hour * 60 + o.minute) * 60 + o.second) * 1000 + o.microsecond // 1000
    if isinstance(o, uuid.UUID):
        return str(o)
    if isinstance(o, (tuple, set, frozenset)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


#: compact, UTF-8, NaN-rejecting encoder with the Connect conversions above
compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False,
                                default=json_default).encode


