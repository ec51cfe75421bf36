"""`lakesink check CONFIG`: validate a config file; returns its summary, ignored keys and warnings."""
from __future__ import annotations

import argparse

from lakesink.cli.output import CheckResult, TranslateResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate a config file and show ignored keys and warnings; --translate "
                                     "another connector's config (Aiven, DeviantArt/Spredfast, Zooz)")
    p.add_argument("config", help="connector config: .properties, Connect JSON or YAML")
    p.add_argument("--translate", action="store_true",
                   help="the config is another S3 archiver's: print the equivalent lakesink config (.properties) "
                        "and what differs; secrets are not printed")
    p.set_defaults(func=run)


def check(path: str) -> CheckResult:
    from lakesink.config import load_config
    from lakesink.config.keys import MASK

    cfg = load_config(path)

    def show(key: str, value):  # a value from a config provider (${env:...}) is a secret: masked
        if key in cfg.provided_keys and value not in (None, "", [], ()):
            return [MASK] if isinstance(value, (list, tuple)) else MASK
        return value

    return CheckResult(
        path=str(path), name=show("name", cfg.name), topics=show("topics", list(cfg.topics)),
        topics_regex=show("topics.regex", cfg.topics_regex), format=show("format.class", cfg.format_name),
        partitioner=show("partitioner.class", cfg.partitioner_class), flush_size=show("flush.size", cfg.flush_size),
        bucket=show("s3.bucket.name", cfg.s3_bucket_name), topics_dir=show("topics.dir", cfg.topics_dir),
        manifest_location=show("manifest.location", cfg.manifest_location),
        ignored_keys=sorted((str(k), str(why)) for k, why in cfg.ignored_keys),  # (key, reason) pairs
        warnings=list(cfg.warnings),  # config provider values already masked in them (config.model.build)
    )


def translation(path: str) -> TranslateResult:
    """The lakesink config for another connector's config file (ConfigError when it is not recognised). Config
    provider references are resolved to translate the values, and written back as references where a value
    passes unchanged (the secret stays in its file or variable); a value derived from one is withheld."""
    from pathlib import Path

    from lakesink.config.keys import KNOWN_KEYS, is_secret
    from lakesink.config.parse import flatten, read_source
    from lakesink.config.providers import has_reference, is_provider_key, resolve
    from lakesink.config.translate import CONNECTORS, recognise, to_properties, translate
    from lakesink.errors import ConfigError, ConfigProblem

    p = Path(path)
    if not p.is_file():
        raise ConfigError([ConfigProblem("<file>", str(p), "config file not found")], str(p))
    flat, name = read_source(p)
    given = flatten(flat)
    resolved = resolve(given, str(p))
    raw = dict(resolved.config)
    if name and "name" not in raw:
        raw["name"] = name
    conn = recognise(raw)
    if conn is None:
        known = ", ".join(c.name for c in CONNECTORS.values())
        raise ConfigError([ConfigProblem("<file>", None, f"not recognised as a config of another connector "
                                                         f"({known}); `lakesink check` validates lakesink configs")],
                          str(p))
    t = translate(conn, raw, set(KNOWN_KEYS))
    config, mapping, derived = t.config, t.mapping, []
    if resolved.keys:  # translate once more with the references as written: what differs depends on a provider
        refs = translate(conn, {**raw, **{k: given[k] for k in resolved.keys if k in given}}, set(KNOWN_KEYS))
        for k, v in list(config.items()):
            ref = refs.config.get(k)
            if ref == v and not resolved.reveals(v):
                continue
            if isinstance(ref, str) and has_reference(ref) and not resolved.reveals(ref):
                config[k] = ref  # lakesink resolves it when it loads the translated config
            else:
                derived.append(k)
        config.update({k: str(v) for k, v in given.items() if is_provider_key(str(k).strip())})
        mapping = [(a, b, resolved.scrub(n)) for a, b, n in mapping]
    secrets = sorted(k for k in config if is_secret(k) and not (has_reference(config[k])
                                                               and not resolved.reveals(config[k])))
    withheld = sorted(set(secrets) | set(derived))
    printable = {k: v for k, v in config.items() if k not in withheld}
    header = [f"lakesink config translated from {conn.name} ({path})"]
    header += [resolved.scrub(n) if resolved.keys else n for n in t.notes]
    header += [f"not printed (secret): {k} -- set it here, or use the default credential chain" for k in secrets]
    header += [f"not printed (derived from a config provider value): {k} -- set it here" for k in derived
               if k not in secrets]
    return TranslateResult(path=str(path), connector=conn.name, mapping=mapping,
                           differences=list(conn.differences), properties=to_properties(printable, header),
                           withheld=withheld, notes=list(t.notes))


def run(args: argparse.Namespace, output) -> CheckResult | TranslateResult:
    if args.translate:
        return translation(args.config)
    return check(args.config)
