"""Kafka Connect client overrides in a pasted Connect config (``consumer.override.*``, ``producer.override.*``,
``admin.override.*``): none that changes security is ever dropped.

lakesink has ONE set of Kafka client settings, ``kafka.*``, used by every client it starts (the direct reader
and Spark's source consume; the admin client; restore's producer and the dead-letter producer), so an override
``<prefix><X>`` is handled by this rule:

* a **security** setting ``X`` (``security.protocol``, ``sasl.*``, ``ssl.*``: any ``X`` with a ``security``,
  ``sasl`` or ``ssl`` segment) under any of the three prefixes applies as ``kafka.<X>``, through the same checks
  as ``kafka.<X>`` (a JAAS line is translated for librdkafka, a Java trust store is refused naming what to write);
* any other ``consumer.override.<X>`` (the sink consumes) applies as ``kafka.<X>`` when lakesink's Kafka clients
  take it; a setting they cannot take (``max.poll.records``, ``auto.offset.reset``, a Java class name…) is
  ignored with a warning saying why;
* any other ``producer.override.<X>`` / ``admin.override.<X>`` is ignored with a warning: applied as
  ``kafka.<X>`` it would change the consumers too; write ``kafka.<X>`` to mean every client.

An applied override conflicts with ``kafka.<X>``, or with another override of ``<X>``, set to another value: a
config problem naming both keys (one set of settings cannot hold both).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from lakesink.config.keys import shown

__all__ = ["OVERRIDE_PREFIXES", "is_override", "is_security_setting", "Overrides", "apply_overrides"]

OVERRIDE_PREFIXES = ("consumer.override.", "producer.override.", "admin.override.")
_SECURITY_SEGMENTS = ("security", "sasl", "ssl")


def is_override(key: str) -> bool:
    """Whether ``key`` is a Connect client override (``consumer.override.*`` …)."""
    return key.startswith(OVERRIDE_PREFIXES)


def is_security_setting(name: str) -> bool:
    """Whether a Kafka client setting changes how the client authenticates or encrypts (``security.protocol``,
    ``sasl.*``, ``ssl.*``, librdkafka's ``enable.ssl.certificate.verification`` …)."""
    return any(seg in _SECURITY_SEGMENTS for seg in name.lower().split("."))


@dataclass
class Overrides:
    """What the overrides of a config mean: ``kafka`` the ``kafka.*`` settings they add (prefix stripped),
    ``sources`` each such setting's override key, ``ignored`` (key, reason), ``problems`` (key, value, message)
    with the value as given (the caller masks it), ``applied`` the override keys applied."""

    kafka: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    problems: list[tuple[str, Any, str]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """One line naming the applied overrides (``lakesink check`` lists the ignored ones with their reason)."""
        if not self.applied:
            return []
        return ["Connect client overrides applied as kafka.* (lakesink's Kafka clients share one set of settings): "
                + ", ".join(f"{k} -> kafka.{_setting(k)}" for k in self.applied)]


def _setting(key: str) -> str:
    for prefix in OVERRIDE_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _ignore_reason(key: str, value: str) -> str | None:
    """Why a non-security override is not applied (None: it is applied as ``kafka.<X>``)."""
    from lakesink.config.kafka import refusal

    name = _setting(key)
    if not key.startswith("consumer.override."):
        return (f"lakesink's Kafka clients share the kafka.* settings, so a {key[:key.index('.')]}-only "
                f"setting has no place; write kafka.{name} to apply it to every client")
    why = refusal(name, value)
    if why is None:
        return None
    return f"not applied as kafka.{name}: " + (f"it {why}" if why.startswith("is ") else why)


def apply_overrides(overrides: Mapping[str, Any], kafka: Mapping[str, str]) -> Overrides:
    """The meaning of ``overrides`` (override key → value) next to the config's ``kafka`` settings (prefix
    stripped): see the module's rule."""
    out = Overrides()
    for key, raw in overrides.items():
        key = str(key).strip()
        value = raw if isinstance(raw, str) else ("true" if raw is True else "false" if raw is False else str(raw))
        value = value.strip()
        name = _setting(key)
        if not name:
            out.problems.append((key, raw, "names no client setting"))
            continue
        if not is_security_setting(name):
            reason = _ignore_reason(key, value)
            if reason is not None:
                out.ignored.append((key, reason))
                continue
        if name in kafka and kafka[name] != value:
            out.problems.append((key, raw, f"conflicts with kafka.{name}={shown('kafka.' + name, kafka[name])!r}: "
                                           f"lakesink's Kafka clients share one set of settings; make them "
                                           f"equal or remove {key}"))
            continue
        if name in out.kafka and out.kafka[name] != value:
            other = out.sources[name]
            out.problems.append((key, raw, f"conflicts with {other}={shown(other, out.kafka[name])!r}: "
                                           f"lakesink's Kafka clients share one set of settings (kafka.{name}); "
                                           f"set kafka.{name} once instead"))
            continue
        out.kafka.setdefault(name, value)
        out.sources.setdefault(name, key)
        out.applied.append(key)
    return out
