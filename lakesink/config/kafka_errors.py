"""What a librdkafka client's error callback says, in one line, and whether waiting longer could change it.

Every librdkafka client lakesink builds (the driver's admin clients, the direct reader's consumers, restore's and the
dead-letter queue's producers) reports connection-level trouble through ``error_cb``: librdkafka retries it forever
on its own, so the callback is the only place the cause shows. :func:`classify` names it:

=================== ============================================= ===============================================
kind                librdkafka says                               definitive
=================== ============================================= ===============================================
``authentication``  ``_AUTHENTICATION``, SASL_AUTHENTICATION_...   always: the broker answered no
``authorization``   ``*_AUTHORIZATION_FAILED``                     always
``tls``             ``_SSL`` (certificate verify failed, a         always: the certificate will not change
                    handshake that fails)
``resolve``         ``_RESOLVE`` / "Failed to resolve"             when every bootstrap server failed (a client
                                                                  that never reached a broker)
``refused``         ``_TRANSPORT`` "Connection refused"            same
``transport``       any other ``_TRANSPORT`` / timeout             never (a broker restarting, a network blip)
=================== ============================================= ===============================================

:class:`ErrorWatch` is the ``error_cb`` every client gets; its :meth:`~ErrorWatch.failure` is the first definitive
failure. Messages name the mechanism and the user of a SASL login, never the password (:func:`mask` removes it from
anything quoted from librdkafka). :data:`LOGGER_NAME` is the Python logger every client's own log lines go to
(confluent-kafka's ``logger`` setting): the CLI sends it to the run's log file, or the terminal with ``--verbose``
(:func:`lakesink.runtime.logs.set_verbose`).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["LOGGER_NAME", "KafkaFailure", "ErrorWatch", "classify", "mask", "client_logging", "DEFINITIVE"]

#: the Python logger of librdkafka's own log lines (see :func:`client_logging`)
LOGGER_NAME = "lakesink.librdkafka"
#: kinds that are never transient
DEFINITIVE = ("authentication", "authorization", "tls")

_AUTH_CODES = (-169, 58)  # _AUTHENTICATION, SASL_AUTHENTICATION_FAILED
_AUTHZ_CODES = (29, 30, 31, 53)  # TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED
_SSL, _RESOLVE, _TRANSPORT, _ALL_BROKERS_DOWN = -181, -193, -195, -187
_BROKER = re.compile(r"^(?:\w+://)?([^/\s]+)/(?:bootstrap|\d+|[\w.-]+): ")
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)\s*$")
_SSL_REASON = re.compile(r"SSL routines::([^:]+)")


@dataclass(frozen=True)
class KafkaFailure:
    """One classified client error: ``kind`` (see the module docstring), the broker it names (``host:port``, or
    None), and ``message``, one line without any secret."""

    kind: str
    broker: str | None
    message: str

    @property
    def definitive(self) -> bool:
        """Never worth a retry (an answer from the broker, or a certificate); resolve/refused are judged by the
        caller (:meth:`ErrorWatch.failure`)."""
        return self.kind in DEFINITIVE


def mask(text: str, conf: Mapping[str, Any]) -> str:
    """``text`` with every secret value of ``conf`` (``sasl.password``, ``ssl.key.password``, ...) replaced."""
    for k, v in conf.items():
        if v and isinstance(v, str) and len(v) >= 3 and ("password" in k or "secret" in k or k.endswith(".pem")
                                                          or k == "sasl.jaas.config"):
            text = text.replace(v, "******")
    return text


def _text(err: Any) -> str:
    return err.str() if hasattr(err, "str") else str(err)


def _code(err: Any) -> int | None:
    return err.code() if hasattr(err, "code") else None


def classify(err: Any, conf: Mapping[str, Any]) -> KafkaFailure:
    """A ``KafkaError`` from an error callback (or a ``KafkaException``'s) as a :class:`KafkaFailure`; ``conf`` is
    the client's librdkafka config (for the mechanism, user and CA it names)."""
    if hasattr(err, "args") and err.args and hasattr(err.args[0], "code"):  # a KafkaException
        err = err.args[0]
    code, raw = _code(err), _text(err)
    text = mask(_AFTER.sub("", raw), conf)
    m = _BROKER.match(text)
    broker = m.group(1) if m else None
    detail = text[m.end():] if m else text
    where = broker or conf.get("bootstrap.servers", "?")
    if code in _AUTH_CODES or "SASL authentication error" in raw or "Authentication failed" in raw:
        mech = conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "?"
        user = conf.get("sasl.username")
        who = f", user {user!r}" if user else ""
        return KafkaFailure("authentication", broker, f"authentication failed at {where} (SASL {mech}{who}): the "
                                                      f"broker refused the credentials; check the user and password "
                                                      f"in kafka.sasl.jaas.config")
    if code in _AUTHZ_CODES:
        return KafkaFailure("authorization", broker, f"not authorized at {where}: {detail}")
    if code == _SSL or "SSL handshake failed" in raw:
        reason = _SSL_REASON.search(raw)
        if "certificate verify failed" in raw:
            why = reason.group(1) if reason else "certificate verify failed"
            ca = conf.get("ssl.ca.location") or ("kafka.ssl.truststore.location" if conf.get("ssl.ca.pem")
                                                 else "the system's CA certificates")
            return KafkaFailure("tls", broker, f"TLS certificate of {where} not trusted ({why}): the CA that signed "
                                               f"it is not in {ca} (kafka.ssl.ca.location or "
                                               f"kafka.ssl.truststore.location)")
        hint = (" (is it a TLS listener? kafka.security.protocol)" if reason and "wrong version" in reason.group(1)
                else "")
        return KafkaFailure("tls", broker, f"TLS handshake with {where} failed{hint}: {detail}")
    if code == _RESOLVE or "Failed to resolve" in raw:
        host = broker.rsplit(":", 1)[0] if broker else where
        return KafkaFailure("resolve", broker, f"host name {host!r} does not resolve (kafka.bootstrap.servers)")
    if "Connection refused" in raw:
        return KafkaFailure("refused", broker, f"connection refused by {where}: nothing listens there "
                                               f"(kafka.bootstrap.servers, or the broker is down)")
    if code == _ALL_BROKERS_DOWN:
        return KafkaFailure("all-down", broker, f"no broker of {conf.get('bootstrap.servers', '?')} is reachable")
    if "security.protocol" in raw:  # "Disconnected while requesting ApiVersion: might be caused by incorrect ..."
        return KafkaFailure("tls", broker, f"{where} closed the connection: {detail}")
    return KafkaFailure("transport", broker, f"{where}: {detail}")


class ErrorWatch:
    """The ``error_cb`` of one client: keeps what librdkafka reported (classified) and answers whether it is
    definitive. Thread-safe (librdkafka calls it from ``poll`` on whatever thread polls)."""

    def __init__(self, conf: Mapping[str, Any]):
        self.conf = dict(conf)
        self.seen: list[KafkaFailure] = []
        self.all_down = False
        self._lock = threading.Lock()

    def __call__(self, err: Any) -> None:
        f = classify(err, self.conf)
        with self._lock:
            if f.kind == "all-down":
                self.all_down = True
            else:
                self.seen.append(f)

    def failure(self, connecting: bool = True) -> KafkaFailure | None:
        """The first definitive failure so far, or None. ``connecting``: the client has not reached a broker yet,
        so a host that does not resolve or refuses is definitive too once every bootstrap server failed."""
        with self._lock:
            for f in self.seen:
                if f.definitive:
                    return f
            if connecting and self.all_down:
                for kind in ("resolve", "refused"):
                    for f in self.seen:
                        if f.kind == kind:
                            return f
        return None

    @property
    def attempts(self) -> int:
        """Errors reported so far (each a failed connection attempt or an answer)."""
        return len(self.seen)


def client_logging() -> dict[str, Any]:
    """The settings that send a client's own log lines to :data:`LOGGER_NAME` instead of stderr."""
    import logging

    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers:  # a library's logger: silent unless the application routes it (the CLI does)
        logger.addHandler(logging.NullHandler())
    return {"logger": logger}
