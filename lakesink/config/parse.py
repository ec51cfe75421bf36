"""Reading config sources: Java ``.properties``, Kafka Connect JSON, YAML; nested maps flattened to
dotted keys; Java string escapes; the scalar value parsers the key table uses."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from lakesink.errors import BadValue, ConfigError, ConfigProblem

__all__ = ["as_str", "as_raw_str", "as_int", "as_bool", "as_list", "unescape_java",
           "parse_properties", "flatten", "read_source", "unwrap"]




def as_str(v: Any) -> str:
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    raise BadValue(f"expected a string, got {type(v).__name__}")


def as_raw_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    return as_str(v)


def as_int(v: Any) -> int:
    if isinstance(v, bool):
        raise BadValue("expected an integer, got a boolean")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        n = int(v)
        if not -(2**63) <= n < 2**63:
            raise BadValue("integer out of the 64-bit range")
        return n
    raise BadValue("expected an integer")


def as_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise BadValue("expected true or false")


def as_list(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        out = [as_str(x) for x in v]
    elif isinstance(v, str):
        out = [x.strip() for x in v.split(",")] if v.strip() else []
    else:
        raise BadValue("expected a comma-separated list")
    if any(not x for x in out):
        raise BadValue("list has an empty element")
    return out


def unescape_java(s: str) -> str:
    """Java string escapes: ``\\n \\r \\t \\f \\b \\0 \\\\ \\' \\" \\uXXXX``."""
    if "\\" not in s:
        return s
    out, i, n = [], 0, len(s)
    simple = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "b": "\b", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            d = s[i + 1]
            if d in simple:
                out.append(simple[d])
                i += 2
                continue
            if d == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6] or ""):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` semantics: comments, continuations, separators, escapes."""
    # 1. logical lines
    logical: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        # an odd number of trailing backslashes continues the line
        m = re.search(r"(\\+)$", line)
        cont = bool(m) and len(m.group(1)) % 2 == 1
        body = line[:-1] if cont else line
        pending = body if pending is None else pending + body
        if not cont:
            logical.append(pending)
            pending = None
    if pending is not None:
        logical.append(pending)
    # 2. key / value split, escapes
    out: dict[str, str] = {}
    for line in logical:
        i, n = 0, len(line)
        key_chars: list[str] = []
        while i < n:
            c = line[i]
            if c == "\\" and i + 1 < n:
                key_chars.append(line[i:i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        out[_prop_unescape("".join(key_chars))] = _prop_unescape(line[i:])
    return out


def _prop_unescape(s: str) -> str:
    if "\\" not in s:
        return s
    res, i, n = [], 0, len(s)
    table = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            d = s[i + 1]
            if d == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6]):
                res.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            res.append(table.get(d, d))
            i += 2
            continue
        res.append(c)
        i += 1
    return "".join(res)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested maps → dotted keys (``{"s3": {"bucket": {"name": "b"}}}`` → ``s3.bucket.name``)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


# ----------------------------------------------------------------------------- sources

def _one_line(e: BaseException) -> str:
    """A parser's message on one line (PyYAML's span several, with a caret under the fault)."""
    return " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip() and set(ln.strip()) != {"^"})


def read_source(path: Path) -> tuple[dict[str, Any], str | None]:
    """The config file's keys (and the Connect connector name, for the Connect JSON shape)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError([ConfigProblem("<file>", None, f"is not a UTF-8 text file (byte {e.start}: "
                                         f"{e.object[e.start:e.start + 1]!r}); expected .properties, JSON or YAML")],
                          str(path)) from None
    except OSError as e:
        raise ConfigError([ConfigProblem("<file>", None, f"cannot be read: {e.strerror or e}")], str(path)) from None
    if "\x00" in text:
        raise ConfigError([ConfigProblem("<file>", None, "contains NUL bytes: not a text config file")],
                          str(path)) from None
    suffix = path.suffix.lower()
    if suffix == ".json" or (suffix not in (".yaml", ".yml", ".properties", ".conf") and text.lstrip().startswith("{")):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError([ConfigProblem("<file>", None, f"invalid JSON: {e}")], str(path)) from None
        return unwrap(data, str(path))
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError([ConfigProblem("<file>", None, f"invalid YAML: {_one_line(e)}")], str(path)) from None
        return unwrap(data, str(path))
    return dict(parse_properties(text)), None


def unwrap(data: Any, source: str) -> tuple[dict[str, Any], str | None]:
    """Connect shape ``{"name":..., "config":{...}}`` → (config, name); else (data, None)."""
    if not isinstance(data, Mapping):
        raise ConfigError([ConfigProblem("<file>", None, "top level must be a mapping")], source)
    if "config" in data and isinstance(data["config"], Mapping):
        extra = [k for k in data if k not in ("name", "config", "tasks", "type")]
        if extra:
            raise ConfigError([ConfigProblem(k, None, "unexpected top-level key next to 'config'") for k in extra],
                              source)
        name = data.get("name")
        return dict(data["config"]), (str(name) if name is not None else None)
    return dict(data), None
