"""Restore into another Schema Registry, on the driver: the target's settings and the schema id map, built
before any task starts (:mod:`lakesink.schemas.registry_copy` does the copy and the rewrite).

:func:`target_registry_settings` reads the target registry the way the sink reads its own: a URL, or a mapping
of the sink's ``schema.registry.*`` keys (``schema.registry.url``, ``schema.registry.basic.auth.user.info``,
``schema.registry.basic.auth.credentials.source``, ``schema.registry.ssl.*``, timeouts and retries, config
provider references such as ``${env:VAR}``; the prefix may be left out), validated by the sink's own checks (a
bad key is a ConfigError naming it, exit 3; secrets masked).

:func:`schema_id_map` decides which roles are rewritten (:func:`rewritten_roles`) -- by default those the archive
gives back in wire format: values with ``value.decoder=avro`` archived as Avro or Parquet (framed again with the
row's ``schema_id``), keys with ``key.decoder=avro`` in Avro keys files (framed with the file's key schema id); a
ByteArray archive of the raw bytes (``value.decoder``/``key.decoder`` ``bytes``) of wire-format Avro, Protobuf or
JSON Schema names its roles (``roles=``, ``--target-registry-ids``) -- and which source ids are copied: the manifest's ``schema_id`` of every selected object, and every version registered in the
source registry (the config's ``schema.registry.url``) under the subjects the source topics' records are
serialized with (``<source topic>-value`` / ``-key`` under TopicNameStrategy, and the subjects the manifest
rows name). The archive is not read for this; a record carrying an id outside the map fails its task before it
is produced (:meth:`~lakesink.schemas.registry_copy.IdMap.rewriter`), naming it.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from lakesink import wiring
from lakesink.errors import ConfigError, ConfigProblem, InvalidArgumentError
from lakesink.schemas.registry import RegistrySettings, shared_client
from lakesink.schemas.registry_copy import TARGET_STRATEGIES, IdMap, copy_schemas, manifest_ids, subject_ids

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config import SinkConfig
    from lakesink.executor.readback import ArchivedObject

__all__ = ["target_registry_settings", "rewritten_roles", "schema_id_map"]

_P = "schema.registry."


def target_registry_settings(target: Any, source: str | None = None) -> RegistrySettings:
    """The target registry's :class:`RegistrySettings` from a URL, a RegistrySettings, or a mapping of the
    sink's ``schema.registry.*`` keys (``source``: the file it came from, for messages)."""
    if isinstance(target, RegistrySettings):
        return target
    if isinstance(target, str):
        flat: dict[str, Any] = {_P + "url": target}
    elif isinstance(target, Mapping):
        flat = {(k if str(k).startswith(_P) else _P + str(k)): v for k, v in target.items()}
    else:
        raise InvalidArgumentError(f"target_registry must be a URL, a RegistrySettings or a mapping of "
                                   f"schema.registry.* keys, not {type(target).__name__}")
    from lakesink.config.providers import resolve
    from lakesink.config.schema_registry import check_registry
    from lakesink.config.validate import Problems

    where = source or "--target-registry"
    resolved = resolve(flat, source)
    flat = {k: (str(v).strip() if v is not None else None) for k, v in resolved.config.items()}
    url = flat.pop(_P + "url", None)
    problem = Problems()
    if not url:
        problem(_P + "url", url, "the target Schema Registry's URL is missing")
    options = {k[len(_P):]: v for k, v in flat.items()}
    reg = check_registry(url, options, {}, "bytes", "bytes", "bytearray", "bytearray", problem)
    if problem.problems:
        problems = [resolved.problem(p) for p in problem.problems] if resolved.keys else problem.problems
        raise ConfigError(problems, where)
    # wiring.registry_settings reads only the config's parsed registry section
    settings = wiring.registry_settings(SimpleNamespace(registry=reg))  # type: ignore[arg-type]
    assert settings is not None
    return settings


def rewritten_roles(cfg: "SinkConfig", roles: Iterable[str] | str | None = None) -> tuple[str, ...]:
    """The roles whose restored bytes carry a registry schema id: ``roles`` when given (``value``, ``key``,
    ``both``), else those ``cfg``'s decoders and formats give back in wire format (see the module docstring)."""
    if roles is not None:
        names = ["value", "key"] if roles == "both" else [roles] if isinstance(roles, str) else list(roles)
        bad = [r for r in names if r not in ("value", "key")]
        if bad or not names:
            raise InvalidArgumentError(f"target registry roles {names!r}: give value, key or both")
        return tuple(r for r in ("value", "key") if r in names)
    out = []
    if cfg.value_decoder == "avro" and cfg.format_name in ("avro", "parquet"):
        out.append("value")
    if cfg.key_decoder == "avro" and cfg.keys_format_name == "avro":
        out.append("key")
    return tuple(out)


def schema_id_map(cfg: "SinkConfig", target: Any, objects: Iterable["ArchivedObject"],
                  destinations: Mapping[str, str], strategy: str = "topic",
                  roles: Iterable[str] | str | None = None) -> IdMap:
    """Copy the schemas the selected ``objects`` use from the config's registry into ``target`` (a URL, a
    RegistrySettings or ``schema.registry.*`` keys) and return the id map. ``destinations``: source topic ->
    destination topic. Raises ConfigError (no source registry, no registry decoder, a bad target key),
    SchemaCopyError, RegistryAuthError, RegistryError -- before anything is produced."""
    if strategy not in TARGET_STRATEGIES:
        raise InvalidArgumentError(f"target subject strategy {strategy!r} not in {list(TARGET_STRATEGIES)}")
    roles = rewritten_roles(cfg, roles)
    if not roles:
        raise InvalidArgumentError(
            f"--target-registry rewrites the schema ids of wire-format records, and this archive gives back none by "
            f"itself (value.decoder={cfg.value_decoder} with format {cfg.format_name}, key.decoder={cfg.key_decoder}): "
            f"for raw wire-format bytes archived as they were read, say which with --target-registry-ids "
            f"value|key|both; nothing was restored")
    source_settings = wiring.registry_settings(cfg)
    if source_settings is None:
        raise ConfigError([ConfigProblem("schema.registry.url", None, "--target-registry copies the archive's "
                                         "schemas from the source registry, and the config names none")], cfg.source)
    target_settings = target_registry_settings(target)
    source, dest = shared_client(source_settings), shared_client(target_settings)
    objs = list(objects)
    _ids, subjects = manifest_ids(objs)
    maps: dict[str, set[int]] = {}
    by_dest: dict[str, set[str]] = {}
    for o in objs:
        by_dest.setdefault(destinations[o.topic], set()).add(o.topic)
    copies: list = []
    pairs: dict[str, dict[int, int]] = {role: {} for role in roles}
    for dest_topic, src_topics in sorted(by_dest.items()):
        for role in roles:
            names = {f"{t}-{role}" for t in src_topics}
            if role == "value":
                names |= {s for o in objs if o.topic in src_topics for s in subjects.get(o.schema_id, ())
                          if o.schema_id is not None}
            ids = set(subject_ids(source, sorted(names)))
            if role == "value":
                ids |= {o.schema_id for o in objs if o.topic in src_topics and o.schema_id is not None}
            maps[role] = ids
        one = copy_schemas(source, dest, {r: maps[r] for r in roles}, topic=dest_topic, strategy=strategy,
                           source_topic=sorted(src_topics)[0] if len(src_topics) == 1 else None, subjects=subjects)
        for role in roles:
            pairs[role].update(one.mapping(role) or {})
        copies += one.copies
    return IdMap.of(pairs.get("value"), pairs.get("key"), target_settings.shown_url, copies)
