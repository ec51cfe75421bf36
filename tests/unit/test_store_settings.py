"""One S3 settings value (issue #27): the object store holds the same :class:`S3Settings` the manifest renders for
S3A and delta-rs, built by one builder, with one default region."""
from __future__ import annotations

from dataclasses import fields

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.store import S3Settings, StoreSettings, open_store
from lakesink.store.local import LocalStore

BASE = {"name": "job", "topics": "a", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092",
        "store.url": "http://127.0.0.1:9000", "aws.access.key.id": "AKIAEXAMPLE", "aws.secret.access.key": "sekrit-9"}


def test_store_and_manifest_share_one_s3_settings_value() -> None:
    cfg = SinkConfig.from_dict({**BASE, "s3.region": "eu-central-1", "s3.path.style.access.enabled": "false"})
    store = wiring.store_settings(cfg)
    assert store.s3 == wiring.s3_settings(cfg)
    assert (store.s3.endpoint_url, store.s3.region, store.s3.path_style) == ("http://127.0.0.1:9000", "eu-central-1", False)
    assert "sekrit-9" not in repr(store) and "AKIAEXAMPLE" not in repr(store)


def test_the_config_default_region_reaches_every_renderer() -> None:
    cfg = SinkConfig.from_dict(BASE)  # no s3.region: the config key table's default (Confluent's us-west-2)
    s3 = wiring.store_settings(cfg).s3
    assert s3.region == "us-west-2"
    assert s3.boto3_kwargs()["region_name"] == s3.hadoop_conf()["fs.s3a.endpoint.region"] \
        == s3.object_store_options()["AWS_REGION"] == "us-west-2"


def test_store_settings_have_no_location_fields_of_their_own() -> None:
    names = {f.name for f in fields(StoreSettings)}
    assert not names & {"region", "endpoint_url", "path_style", "access_key", "secret_key"}
    assert StoreSettings("b").s3.region == S3Settings().region  # one default region in code


def test_a_file_endpoint_is_a_local_store(tmp_path) -> None:
    st = open_store(StoreSettings("bkt", S3Settings(f"file://{tmp_path}")))
    assert isinstance(st, LocalStore) and st.uri("k").startswith(f"file://{tmp_path}/bkt/")
    local = {k: v for k, v in BASE.items() if not k.startswith("aws.")}
    cfg = SinkConfig.from_dict({**local, "store.url": f"file://{tmp_path}", "manifest.location": str(tmp_path / "m")})
    assert wiring.s3_settings(cfg) is None and wiring.store_settings(cfg).is_local


def test_stores_opened_again_in_a_worker_share_their_s3_client() -> None:
    """A worker opens the store once per Kafka range: the same settings reuse the boto3 client (no client built per
    range), new credentials, another endpoint or another thread get their own."""
    import threading

    first = open_store(wiring.store_settings(SinkConfig.from_dict(BASE)))
    again = open_store(wiring.store_settings(SinkConfig.from_dict(BASE)))
    assert again is not first and again.client is first.client
    rotated = open_store(wiring.store_settings(SinkConfig.from_dict({**BASE, "aws.secret.access.key": "other-1"})))
    assert rotated.client is not first.client
    assert rotated.client._request_signer._credentials.secret_key == "other-1"
    elsewhere = open_store(wiring.store_settings(SinkConfig.from_dict({**BASE, "store.url": "http://127.0.0.1:9001"})))
    assert elsewhere.client is not first.client and elsewhere.client.meta.endpoint_url == "http://127.0.0.1:9001"
    other: list = []
    t = threading.Thread(target=lambda: other.append(open_store(wiring.store_settings(SinkConfig.from_dict(BASE)))))
    t.start()
    t.join()
    assert other[0].client is not first.client
