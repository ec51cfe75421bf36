"""Kafka config providers in config values: ``${file:/path:key}``, ``${directory:/path:file}``, ``${env:VAR}``.

Kafka (KIP-297 clients, KIP-421 Connect connectors) replaces each ``${provider:[path:]key}`` in a config value
with what the named :class:`ConfigProvider` returns for (path, key); lakesink does the same, once, when a config
is loaded (:func:`resolve`, called by :func:`lakesink.config.model.load_config`), so every command and the
Python API see the resolved values. The reference syntax is Kafka's ``ConfigTransformer.DEFAULT_PATTERN``
(provider up to the first ``:``, path up to the next, the rest is the key); a resolved value is not resolved
again. The three providers are Kafka's, re-implemented:

* ``FileConfigProvider`` (``${file:/etc/s.properties:key}``): the key of a Java ``.properties`` file;
* ``DirectoryConfigProvider`` (``${directory:/run/secrets:name}``): the content of file ``name`` in the
  directory (as it is: a trailing newline is kept, as Connect keeps it; lakesink strips most values);
* ``EnvVarConfigProvider`` (``${env:VAR}``, KIP-887): an environment variable; no path.

Declaring them: ``config.providers=file,env`` and ``config.providers.<name>.class=<Kafka class>``, with
``config.providers.<name>.param.<p>``: ``allowed.paths`` (file, directory; KIP-993: comma-separated absolute
paths that exist; a reference outside them is refused) and ``allowlist.pattern`` (env: a regex a variable's name
must match whole). Without ``config.providers`` lakesink acts as if ``config.providers=file,directory,env`` were
declared with Kafka's classes (Connect needs the worker to declare them; lakesink has no worker); the
``config.providers.*`` params of those names still apply. With ``config.providers`` only the declared names resolve.

Differences from Kafka, on purpose: a reference Kafka would leave as it is (unknown provider, missing file, key
or variable, a path outside ``allowed.paths``, a name outside ``allowlist.pattern``) is a config error naming the
key and the reference (exit 3): a literal ``${env:PASSWORD}`` used as a password would fail much later and far
from its cause. Only Kafka's three classes are accepted (a Vault or AWS provider class is a Java plug-in lakesink
cannot run). Values are read once per load: there is no TTL (Kafka's file providers set none either).

Every value that came from a provider is a secret: :class:`Resolved` knows the keys and the values, and masks
them (:meth:`Resolved.masked`, :meth:`Resolved.scrub`) in errors, warnings and what ``lakesink check`` prints.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Callable, Mapping

from lakesink.config.keys import MASK
from lakesink.config.parse import parse_properties
from lakesink.errors import BadValue, ConfigError, ConfigProblem

__all__ = ["REFERENCE", "PREFIX", "CLASSES", "DEFAULT_PROVIDERS", "MIN_SCRUB_LENGTH",
           "Provider", "FileProvider", "DirectoryProvider", "EnvProvider", "Resolved", "is_provider_key",
           "has_reference", "declared_providers", "resolve", "scrub_resolved", "RESOLVED_VALUES"]

#: Kafka's ``ConfigTransformer.DEFAULT_PATTERN``
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
PREFIX = "config.providers"
#: a resolved value at least this long is also masked where it appears inside other text
MIN_SCRUB_LENGTH = 4
# every value resolved in this process: the CLI masks them in any error line (scrub_resolved)
RESOLVED_VALUES: set[str] = set()


class Provider:
    """One configured provider: :meth:`get` returns the values of ``keys`` under ``path`` (missing keys absent),
    or raises :class:`~lakesink.errors.BadValue` (turned into a ConfigProblem naming the key and reference)."""

    params: tuple[str, ...] = ()

    def __init__(self, name: str, params: Mapping[str, str]):
        self.name = name

    def get(self, path: str, keys: set[str]) -> dict[str, str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def missing(self, path: str, key: str) -> str:
        return f"has no value for {key!r}"


def _allowed_paths(name: str, value: str | None) -> list[PurePath] | None:
    """KIP-993's ``allowed.paths``: absolute paths that exist (normalised), or None (every path)."""
    if not value:
        return None
    out = []
    for item in value.split(","):
        p = PurePath(os.path.normpath(item.strip()))
        if not p.is_absolute():
            raise BadValue(f"config.providers.{name}.param.allowed.paths: {str(p)!r} is not absolute")
        if not os.path.exists(p):
            raise BadValue(f"config.providers.{name}.param.allowed.paths: {str(p)!r} does not exist")
        out.append(p)
    return out


class _PathProvider(Provider):
    params = ("allowed.paths",)
    shape = "/path/file.properties:key"

    def __init__(self, name: str, params: Mapping[str, str]):
        super().__init__(name, params)
        self.allowed = _allowed_paths(name, params.get("allowed.paths"))

    def checked(self, path: str) -> Path:
        if not path:
            raise BadValue(f"needs a path (${{{self.name}:{self.shape}}})")
        if self.allowed is None:
            return Path(path)
        norm = PurePath(os.path.normpath(path))  # lexically, as Kafka's AllowedPaths (no symlinks followed)
        if not any(norm == a or a in norm.parents for a in self.allowed):
            raise BadValue(f"path {path!r} is outside config.providers.{self.name}.param.allowed.paths")
        return Path(norm)


class FileProvider(_PathProvider):
    """``FileConfigProvider``: ``${file:/path/to/file.properties:key}``."""

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        p = self.checked(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadValue(f"file {path!r} does not exist") from None
        except UnicodeDecodeError:
            raise BadValue(f"file {path!r} is not UTF-8 text (a .properties file is expected)") from None
        except OSError as e:
            raise BadValue(f"file {path!r} cannot be read: {e.strerror or type(e).__name__}") from None
        props = parse_properties(text)
        return {k: props[k] for k in keys if k in props}

    def missing(self, path: str, key: str) -> str:
        return f"file {path!r} has no key {key!r}"


class DirectoryProvider(_PathProvider):
    """``DirectoryConfigProvider``: ``${directory:/path/to/dir:file}`` (the file's whole content)."""

    shape = "/path/dir:file"

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        d = self.checked(path)
        if not d.is_dir():
            raise BadValue(f"{path!r} is not a directory")
        out = {}
        for k in keys:
            f = d / k
            if "/" in k or os.sep in k or k in (".", "..") or not f.is_file():
                continue
            try:
                out[k] = f.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                raise BadValue(f"file {k!r} in directory {path!r} is not UTF-8 text") from None
            except OSError as e:
                raise BadValue(f"file {k!r} in directory {path!r} cannot be read: "
                                      f"{e.strerror or type(e).__name__}") from None
        return out

    def missing(self, path: str, key: str) -> str:
        return f"directory {path!r} has no file {key!r}"


class EnvProvider(Provider):
    """``EnvVarConfigProvider`` (KIP-887): ``${env:VAR}``; ``allowlist.pattern`` must match the whole name."""

    params = ("allowlist.pattern",)
    def __init__(self, name: str, params: Mapping[str, str], environ: Mapping[str, str] | None = None):
        super().__init__(name, params)
        self.environ = environ
        pattern = params.get("allowlist.pattern")
        try:
            self.allow = re.compile(pattern) if pattern is not None else None
        except re.error as e:
            raise BadValue(f"config.providers.{name}.param.allowlist.pattern is not a valid regular "
                                  f"expression: {e}") from None

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        if path:
            raise BadValue(f"takes no path (write ${{{self.name}:VARIABLE}})")
        env = os.environ if self.environ is None else self.environ
        return {k: env[k] for k in keys if k in env and self.allowed(k)}

    def allowed(self, var: str) -> bool:
        return self.allow is None or self.allow.fullmatch(var) is not None

    def missing(self, path: str, key: str) -> str:
        if not self.allowed(key):
            return f"environment variable {key!r} does not match config.providers.{self.name}.param.allowlist.pattern"
        return f"environment variable {key!r} is not set"


_KAFKA = "org.apache.kafka.common.config.provider."
#: the provider classes lakesink implements, by their Kafka class name
CLASSES: dict[str, Callable[..., Provider]] = {
    _KAFKA + "FileConfigProvider": FileProvider,
    _KAFKA + "DirectoryConfigProvider": DirectoryProvider,
    _KAFKA + "EnvVarConfigProvider": EnvProvider,
}
#: what lakesink assumes when the config declares no ``config.providers``
DEFAULT_PROVIDERS = {"file": _KAFKA + "FileConfigProvider", "directory": _KAFKA + "DirectoryConfigProvider",
                     "env": _KAFKA + "EnvVarConfigProvider"}


def is_provider_key(key: str) -> bool:
    """``config.providers`` and ``config.providers.*``: the declaration, not config values."""
    return key == PREFIX or key.startswith(PREFIX + ".")


def has_reference(value: Any) -> bool:
    return isinstance(value, str) and REFERENCE.search(value) is not None


def declared_providers(flat: Mapping[str, Any], environ: Mapping[str, str] | None = None
                       ) -> tuple[dict[str, Provider], list[ConfigProblem]]:
    """The providers the config declares (``config.providers*``), or the three built-ins; problems found."""
    problems: list[ConfigProblem] = []
    decl = {str(k).strip(): v for k, v in flat.items() if is_provider_key(str(k).strip())}
    if PREFIX in decl:
        raw = decl[PREFIX]
        names = [n.strip() for n in (raw if isinstance(raw, (list, tuple)) else str(raw or "").split(","))]
        names = [str(n).strip() for n in names if str(n).strip()]
        classes: dict[str, str | None] = {n: None for n in names}
    else:
        classes = dict(DEFAULT_PROVIDERS)
    params: dict[str, dict[str, str]] = {n: {} for n in classes}
    for key, value in decl.items():
        if key == PREFIX:
            continue
        m = re.fullmatch(re.escape(PREFIX) + r"\.([^.]+)\.(class|param\.(.+))", key)
        if m is None:
            problems.append(ConfigProblem(key, value, "is not a config provider setting (config.providers.<name>."
                                                      "class or config.providers.<name>.param.<param>)"))
            continue
        name = m.group(1)
        if name not in classes:
            listed = ", ".join(classes) or "none"
            problems.append(ConfigProblem(key, value, f"provider {name!r} is not declared in config.providers "
                                                      f"(declared: {listed})"))
            continue
        if m.group(2) == "class":
            classes[name] = str(value).strip()
        else:
            params[name][m.group(3)] = "" if value is None else str(value).strip()
    providers: dict[str, Provider] = {}
    for name, cls in classes.items():
        if not cls:
            problems.append(ConfigProblem(f"{PREFIX}.{name}.class", None, f"is required: config.providers declares "
                                                                          f"{name!r}"))
            continue
        factory = CLASSES.get(cls)
        if factory is None:
            known = ", ".join(c.rsplit(".", 1)[1] for c in CLASSES)
            problems.append(ConfigProblem(f"{PREFIX}.{name}.class", cls, f"is not a provider lakesink implements "
                                                                         f"({known}, in {_KAFKA[:-1]})"))
            continue
        unknown = sorted(set(params[name]) - set(factory.params))  # type: ignore[attr-defined]
        for p in unknown:
            takes = ", ".join(factory.params) or "none"  # type: ignore[attr-defined]
            problems.append(ConfigProblem(f"{PREFIX}.{name}.param.{p}", params[name][p],
                                          f"is not a parameter of {cls.rsplit('.', 1)[1]} (it takes: {takes})"))
        if unknown:
            continue
        try:
            providers[name] = (factory(name, params[name], environ) if factory is EnvProvider
                               else factory(name, params[name]))
        except BadValue as e:
            problems.append(ConfigProblem(f"{PREFIX}.{name}", None, str(e)))
    return providers, problems


@dataclass(frozen=True)
class Resolved:
    """A config with its references replaced: ``config`` (without ``config.providers*``), ``keys`` whose value
    came (in whole or part) from a provider, and the resolved ``values`` (secrets: never print them)."""

    config: dict[str, Any]
    keys: frozenset[str] = frozenset()
    values: tuple[str, ...] = field(default=(), repr=False)

    def reveals(self, value: Any) -> bool:
        """Whether ``value`` is, or shows, a resolved value."""
        if value is None or not self.values:
            return False
        if isinstance(value, (list, tuple)):
            return any(self.reveals(v) for v in value)
        text = str(value)
        return any(text == v or text.strip() == v.strip() or (len(v.strip()) >= MIN_SCRUB_LENGTH and v.strip() in text)
                   for v in self.values if v.strip())

    def masked(self, key: str, value: Any) -> Any:
        """``value`` as it may be shown for ``key``: MASK when the key's value came from a provider or shows one."""
        if value is None:
            return None
        if key in self.keys or self.reveals(value):
            return MASK
        return value

    def scrub(self, text: str) -> str:
        """``text`` with every resolved value of :data:`MIN_SCRUB_LENGTH` characters or more masked."""
        for v in sorted({v.strip() for v in self.values}, key=len, reverse=True):
            if len(v) >= MIN_SCRUB_LENGTH:
                text = text.replace(v, MASK)
        return text

    def problem(self, p: ConfigProblem) -> ConfigProblem:
        return ConfigProblem(p.key, self.masked(p.key, p.value), self.scrub(p.message))


def _substitute(value: str, found: dict[tuple[str, str, str], str]) -> str:
    def one(m: re.Match) -> str:
        return found[(m.group(1), m.group(3) or "", m.group(4))]
    return REFERENCE.sub(one, value)


def resolve(flat: Mapping[str, Any], source: str | None = None,
            environ: Mapping[str, str] | None = None) -> Resolved:
    """Replace every reference in ``flat``'s values (strings, and strings in lists); raise one ConfigError naming
    each key whose reference cannot be resolved (the reference is shown, never a value)."""
    config = {k: v for k, v in flat.items() if not is_provider_key(str(k).strip())}
    refs: dict[str, list[tuple[str, str, str]]] = {}  # key -> references in its value(s)
    for key, value in config.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, str):
                for m in REFERENCE.finditer(item):
                    refs.setdefault(key, []).append((m.group(1), m.group(3) or "", m.group(4)))
    if not refs:
        return Resolved(config)
    providers, problems = declared_providers(flat, environ)
    if problems:
        raise ConfigError(problems, source)
    wanted: dict[tuple[str, str], set[str]] = {}
    for triples in refs.values():
        for name, path, var in triples:
            wanted.setdefault((name, path), set()).add(var)
    answers: dict[tuple[str, str], dict[str, str] | BadValue] = {}
    for (name, path), variables in wanted.items():
        if name in providers:
            try:
                answers[(name, path)] = providers[name].get(path, variables)
            except BadValue as e:
                answers[(name, path)] = e
    found: dict[tuple[str, str, str], str] = {}
    declared = ", ".join(sorted(providers)) or "none"
    for key, triples in refs.items():
        for name, path, var in triples:
            ref = "${" + name + ":" + (path + ":" if path else "") + var + "}"
            if name not in providers:
                msg = (f"unknown config provider {name!r} (declared: {declared}; config.providers names them)"
                       if PREFIX in {str(k).strip() for k in flat} else
                       f"unknown config provider {name!r} (lakesink's are file, directory and env; "
                       f"config.providers declares others)")
            else:
                answer = answers[(name, path)]
                if isinstance(answer, BadValue):
                    msg = f"config provider {name!r}: {answer}"
                elif var not in answer:
                    msg = f"config provider {name!r}: {providers[name].missing(path, var)}"
                else:
                    found[(name, path, var)] = answer[var]
                    continue
            problems.append(ConfigProblem(key, ref, msg))
    if problems:
        raise ConfigError(_unique(problems), source)
    out = dict(config)
    for key in refs:
        value = config[key]
        if isinstance(value, (list, tuple)):
            out[key] = type(value)(_substitute(v, found) if isinstance(v, str) else v for v in value)
        else:
            out[key] = _substitute(value, found)
    values = tuple(sorted(set(found.values())))
    RESOLVED_VALUES.update(v.strip() for v in values if len(v.strip()) >= MIN_SCRUB_LENGTH)
    return Resolved(out, frozenset(_derived_keys(refs)), values)


def scrub_resolved(text: str) -> str:
    """``text`` with every value resolved by a provider in this process masked: for messages that may quote a
    config value at run time (an S3 error naming the bucket, a Kafka error naming a user); the CLI's error line."""
    for v in sorted(RESOLVED_VALUES, key=len, reverse=True):
        text = text.replace(v, MASK)
    return text


def _unique(problems: list[ConfigProblem]) -> list[ConfigProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.key, p.value) not in seen:
            seen.add((p.key, p.value))
            out.append(p)
    return out


def _derived_keys(keys) -> set[str]:
    """The keys given, and the keys lakesink reads them as (a client override as ``kafka.*``, a converter's
    registry setting as ``schema.registry.*``)."""
    out = set()
    for key in keys:
        key = str(key).strip()
        out.add(key)
        for prefix in ("consumer.override.", "producer.override.", "admin.override."):
            if key.startswith(prefix):
                out.add("kafka." + key[len(prefix):])
        for prefix in ("value.converter.", "key.converter.") if key.startswith(("value.converter.",
                                                                                "key.converter.")) else ():
            inner = key[len(prefix):]  # as lakesink.config.schema_registry lifts it
            out.add(inner if inner.startswith("schema.registry.") else "schema.registry." + inner)
            out.add(inner)
    return out
