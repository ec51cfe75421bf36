"""lakesink.credentials: mode selection/validation, config keys, refresh of shipped credentials (fake clock)."""
import pickle
import sys
import types
from datetime import datetime, timezone

import pytest

from lakesink.config import load_config as build_config
from lakesink.credentials import (REFRESH_MARGIN_S, CredentialSettings, Credentials, ShippedCredentials,
                                  boto3_session, resolve, source_for_provider_class)
from lakesink.errors import ConfigError
from lakesink.wiring import store_settings

BASE = {"name": "c", "topics": "t", "s3.bucket.name": "bkt", "manifest.location": "s3://bkt/m",
        "kafka.bootstrap.servers": "localhost:9092", "flush.size": "10"}


@pytest.mark.parametrize("kw,mode", [
    ({}, "default"),
    ({"access_key": "A", "secret_key": "S"}, "static"),
    ({"access_key": "A", "secret_key": "S", "session_token": "T"}, "session"),
    ({"uc_name": "cred"}, "uc-service-credential"),
])
def test_mode_inferred_from_keys(kw, mode):
    assert CredentialSettings.from_keys(None, None, kw.get("access_key"), kw.get("secret_key"),
                                        kw.get("session_token"), kw.get("uc_name")).source == mode


@pytest.mark.parametrize("cls,mode", [
    ("com.amazonaws.auth.DefaultAWSCredentialsProviderChain", "default"),
    ("software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider", "default"),
    ("com.amazonaws.auth.AWSStaticCredentialsProvider", "static"),
    ("org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider", "session"),
])
def test_provider_class_mapped(cls, mode):
    assert source_for_provider_class(cls) == mode


def test_unknown_provider_class_names_key():
    with pytest.raises(ConfigError, match=r"^s3\.credentials\.provider\.class='com\.acme\.Mine': is not supported"):
        source_for_provider_class("com.acme.Mine")


@pytest.mark.parametrize("kw,key", [
    ({"source": "nope"}, "s3.credentials.source"),
    ({"source": "static", "access_key": "A"}, "aws.access.key.id"),
    ({"source": "session", "access_key": "A", "secret_key": "S"}, "aws.session.token"),
    ({"source": "static", "access_key": "A", "secret_key": "S", "session_token": "T"}, "aws.session.token"),
    ({"source": "uc-service-credential"}, "s3.credentials.uc.name"),
    ({"source": "default", "access_key": "A", "secret_key": "S"}, "aws.access.key.id"),
])
def test_invalid_settings_name_the_key(kw, key):
    with pytest.raises(ConfigError, match=rf"^{key.replace('.', chr(92) + '.')}=") as e:
        CredentialSettings(**kw)
    assert "S" not in str(e.value).split(":", 1)[1].split() and "T" not in str(e.value).split()


def test_config_keys_select_the_mode_and_hide_the_token():
    cfg = build_config({**BASE, "aws.access.key.id": "AKIA1", "aws.secret.access.key": "sekrit-1",
                        "aws.session.token": "tok-planted-77"})
    assert cfg.s3_credentials_source == "session"
    assert "tok-planted-77" not in repr(cfg) and "tok-planted-77" not in str(cfg.as_dict(redact=True))
    creds = store_settings(cfg).credentials
    assert creds.source == "session" and creds.session_token == "tok-planted-77"
    assert "tok-planted-77" not in repr(store_settings(cfg)) and "sekrit-1" not in repr(creds)


def test_config_provider_class_and_errors():
    cfg = build_config({**BASE, "s3.credentials.provider.class":
                        "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"})
    assert cfg.s3_credentials_source == "default"
    with pytest.raises(ConfigError, match="s3.credentials.provider.class"):
        build_config({**BASE, "s3.credentials.provider.class": "com.acme.Custom"})
    with pytest.raises(ConfigError, match="s3.credentials.uc.name"):
        build_config({**BASE, "s3.credentials.source": "uc-service-credential"})
    with pytest.raises(ConfigError, match="aws.session.token") as e:
        build_config({**BASE, "s3.credentials.source": "session", "aws.access.key.id": "AKIA1",
                      "aws.secret.access.key": "sekrit-2"})
    assert "sekrit-2" not in str(e.value)


def test_uc_off_databricks_is_a_config_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "databricks", raising=False)
    monkeypatch.setattr("builtins.__import__", _no_databricks(__import__))
    with pytest.raises(ConfigError, match="uc-service-credential needs Databricks Runtime 16.2"):
        resolve(CredentialSettings("uc-service-credential", uc_name="c"))


def _no_databricks(real):
    def imp(name, *a, **kw):
        if name.startswith("databricks"):
            raise ImportError(name)
        return real(name, *a, **kw)
    return imp


class _Frozen:
    def __init__(self, n):
        self.access_key, self.secret_key, self.token = f"AK{n}", f"SK{n}", f"TK{n}"


class _UcCreds:
    """The shape of botocore's RefreshableCredentials that Databricks' provider returns."""

    def __init__(self, n, expiry):
        self.n, self._expiry_time = n, datetime.fromtimestamp(expiry, timezone.utc)

    def get_frozen_credentials(self):
        return _Frozen(self.n)


class _BotocoreSession:
    def __init__(self, creds):
        self.creds = creds

    def get_credentials(self):
        return self.creds


def test_uc_call_path_through_databricks_module(monkeypatch):
    calls = []
    mod = types.ModuleType("databricks.service_credentials")
    mod.getServiceCredentialsProvider = lambda name: calls.append(name) or _BotocoreSession(_UcCreds(1, 5000.0))
    pkg = types.ModuleType("databricks")
    pkg.service_credentials = mod
    monkeypatch.setitem(sys.modules, "databricks", pkg)
    monkeypatch.setitem(sys.modules, "databricks.service_credentials", mod)
    c = resolve(CredentialSettings("uc-service-credential", uc_name="archive-writer"))
    assert calls == ["archive-writer"]
    assert (c.access_key, c.secret_key, c.token, c.expiry) == ("AK1", "SK1", "TK1", 5000.0)


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


class _Resolver:
    def __init__(self, lifetime):
        self.n, self.lifetime, self.clock = 0, lifetime, None

    def __call__(self, settings):
        self.n += 1
        return Credentials(f"AK{self.n}", f"SK{self.n}", f"TK{self.n}", self.clock() + self.lifetime)


def test_shipped_credentials_used_while_fresh_then_re_resolved():
    clock, res = _Clock(1000.0), _Resolver(lifetime=900)
    res.clock = clock
    shipped = ShippedCredentials.on_driver(CredentialSettings("uc-service-credential", uc_name="c"),
                                           clock=clock, resolver=res)
    assert res.n == 1 and shipped.current().access_key == "AK1"  # driver's resolve, no new call
    clock.t = 1000 + 900 - REFRESH_MARGIN_S - 1
    assert shipped.current().access_key == "AK1" and res.n == 1
    clock.t = 1000 + 900 - REFRESH_MARGIN_S                       # within the margin: executor re-resolves
    assert shipped.current().access_key == "AK2" and res.n == 2
    assert shipped.current().access_key == "AK2" and res.n == 2   # and caches the new set


def test_static_and_default_never_expire_and_pickle():
    static = ShippedCredentials(CredentialSettings("static", "A", "S"))
    assert static.current() == Credentials("A", "S", None) and static.current().fresh(1e12)
    assert ShippedCredentials(CredentialSettings()).current() is None
    again = pickle.loads(pickle.dumps(ShippedCredentials.on_driver(CredentialSettings("session", "A", "S", "T"))))
    assert again.current() == Credentials("A", "S", "T")
    assert "S" not in repr(again).replace("ShippedCredentials", "").replace("Settings", "").replace("source", "")


def test_boto3_session_built_from_the_mode():
    s = boto3_session(CredentialSettings("session", "AKX", "SKX", "TKX"), "eu-west-1")
    c = s.get_credentials()
    assert (c.access_key, c.secret_key, c.token, s.region_name) == ("AKX", "SKX", "TKX", "eu-west-1")
    assert boto3_session(CredentialSettings("static", "AKY", "SKY")).get_credentials().token is None


def test_a_thread_keeps_its_session_while_the_credentials_stay(monkeypatch):
    """Another store for the same credentials reuses the Session (no second load of botocore's models); new
    credentials, another region, another thread or a changed AWS_* environment (default chain) get a new one."""
    import threading

    a = boto3_session(CredentialSettings("static", "AK1", "SK1"), "eu-west-1")
    assert boto3_session(CredentialSettings("static", "AK1", "SK1"), "eu-west-1") is a
    rotated = boto3_session(CredentialSettings("static", "AK1", "SK2"), "eu-west-1")
    assert rotated is not a and rotated.get_credentials().secret_key == "SK2"
    assert boto3_session(CredentialSettings("static", "AK1", "SK2"), "us-east-1") is not rotated
    other: list = []
    t = threading.Thread(target=lambda: other.append(boto3_session(CredentialSettings("static", "AK1", "SK2"),
                                                                   "eu-west-1")))
    t.start()
    t.join()
    assert other[0] is not rotated
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENV1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "ENVS")
    chain = boto3_session(CredentialSettings(), "eu-west-1")
    assert boto3_session(CredentialSettings(), "eu-west-1") is chain
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENV2")
    changed = boto3_session(CredentialSettings(), "eu-west-1")
    assert changed is not chain and changed.get_credentials().access_key == "ENV2"


def test_a_kept_client_is_replaced_with_its_session_not_added_to():
    """boto3_client keeps one client per thread, region, service and endpoint: the same credentials get it back,
    rotated ones get a client of their new Session in its place, and the old one is let go (a long run rotating
    credentials holds one)."""
    import gc
    import weakref

    from lakesink.credentials import boto3_client

    def client(secret: str):
        return boto3_client(CredentialSettings("static", "AK9", secret), "eu-west-1", "s3", "http://127.0.0.1:9", None)

    a = client("S1")
    assert client("S1") is a
    gone = weakref.ref(a)
    rotated = client("S2")
    assert rotated is not a and rotated._request_signer._credentials.secret_key == "S2"
    del a
    gc.collect()
    assert gone() is None


def test_every_session_reads_botocore_data_through_one_loader_warmed_before_workers_fork(monkeypatch):
    """Sessions for other credentials, regions or threads share the process's botocore data loader; once
    warm_s3_models has run (what a driver does before it forks its local workers), a new Session's S3 client
    parses no botocore data file at all."""
    import threading

    from botocore.loaders import JSONFileLoader

    from lakesink.credentials import boto3_client, warm_s3_models

    warm_s3_models()
    parsed = []
    real = JSONFileLoader.load_file
    monkeypatch.setattr(JSONFileLoader, "load_file", lambda self, path: parsed.append(path) or real(self, path))
    a = boto3_session(CredentialSettings("static", "AK-warm-1", "SK1"), "eu-west-1")
    b = boto3_session(CredentialSettings("static", "AK-warm-2", "SK2"), "us-east-2")
    other: list = []
    t = threading.Thread(target=lambda: other.append(boto3_session(CredentialSettings("static", "AK-warm-1", "SK1"),
                                                                   "eu-west-1")))
    t.start()
    t.join()
    loaders = {id(s._session.get_component("data_loader")) for s in (a, b, other[0])}
    assert len({id(a), id(b), id(other[0])}) == 3 and len(loaders) == 1
    client = boto3_client(CredentialSettings("static", "AK-warm-3", "SK3"), "ap-south-1", "s3",
                          "http://127.0.0.1:9", None)
    assert client.meta.service_model.service_name == "s3" and parsed == []


FORKED = """
import os, sys
from lakesink.credentials import CredentialSettings, boto3_client
args = (CredentialSettings("static", "AK-fork", "SK"), "eu-west-1", "s3", "http://127.0.0.1:9", None)
parent = boto3_client(*args)
assert boto3_client(*args) is parent
pid = os.fork()
if pid == 0:
    os._exit(0 if boto3_client(*args) is not parent else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_never_uses_its_parents_kept_clients():
    """A kept client's pooled connections are sockets of the process that made it: a forked child (a local worker
    group the driver forked) builds its own, though its main thread has the forking thread's id."""
    import subprocess

    assert subprocess.run([sys.executable, "-c", FORKED], timeout=120).returncode == 0


@pytest.mark.parametrize("value", ["2026-11-28T03:12:46.000Z", "2026-11-28T03:12:46Z", "2026-11-28T03:12:46.123456Z",
                                   "2026-11-28T03:12:46.1234Z", "Wed, 21 Oct 2015 07:28:00 GMT",
                                   "Wed, 21 Oct 2015 07:28:00 +0000", "2015-10-21T07:28:00+02:00", "1700000000",
                                   1700000000, 1700000000.5, "Wed, 32 Oct 2015 07:28:00 GMT"])
def test_timestamps_parse_to_botocores_instants(value):
    """S3's two date forms are parsed by the standard library, anything else by botocore: the same instant as
    botocore's parser, timezone-aware, or the same error."""
    from botocore.utils import parse_timestamp as botocore_parse

    from lakesink.credentials import parse_timestamp

    try:
        want = botocore_parse(value)
    except ValueError:
        with pytest.raises(ValueError):
            parse_timestamp(value)
        return
    got = parse_timestamp(value)
    assert got == want and got.tzinfo is not None and got.utcoffset() == want.utcoffset()


def test_sessions_parse_timestamps_with_lakesinks_parser():
    from lakesink.credentials import parse_timestamp

    s = boto3_session(CredentialSettings("static", "AK-ts", "SK"), "eu-west-1")
    factory = s._session.get_component("response_parser_factory")
    assert factory.create_parser("rest-xml")._timestamp_parser is parse_timestamp
