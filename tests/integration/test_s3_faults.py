"""S3 faults injected by a loopback proxy (tests/support/s3_proxy.py) in front of the moto S3 endpoint: 503
SlowDown at 5/20/40 %, connections reset mid-upload, responses lost after S3 did the work, and a dead store.

The objects (boto3, in the executors and on the driver) and the manifest (delta-rs) both go through the proxy. The
sink must finish by retrying, with the manifest exact (every offset once, no duplicate object row, no orphan,
no open multipart upload) and the retries counted in the batch result; with every request refused it fails
within ``s3.retry.deadline.ms`` naming the endpoint, committing nothing.
"""
from __future__ import annotations

import time

import pytest
from support.archive_checks import base_config, check_chains, check_exactly_once, json_payloads, manifest_rows, produce
from support.s3_proxy import FaultProxy

from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.driver.vacuum import vacuum
from lakesink.errors import BatchFailedError, ManifestError, StoreError
from lakesink.store import S3Settings, S3Store, StoreSettings, backoff_s, open_store
from lakesink.manifest.deltars import RETRY_OPTIONS
from lakesink.store.settings import S3A_RETRY_CONF


@pytest.fixture
def proxy(s3):
    p = FaultProxy(s3.endpoint_url).start()
    try:
        yield p
    finally:
        p.stop()


def _store(s3, url: str, bucket: str, **over) -> S3Store:
    return open_store(StoreSettings(bucket, S3Settings(url, "testing", "testing"), **over))


def test_backoff_is_full_jitter_exponential_and_capped():
    assert backoff_s(1, 200, lambda a, b: b) == pytest.approx(0.2)
    assert backoff_s(4, 200, lambda a, b: b) == pytest.approx(1.6)
    assert backoff_s(40, 200, lambda a, b: b) == 10.0
    assert backoff_s(3, 200, lambda a, b: a) == 0.0


def test_store_calls_ride_out_40_percent_slowdowns(s3, proxy, bucket):
    store = _store(s3, proxy.url, bucket, retry_backoff_ms=20)
    proxy.slowdown = 0.4
    for i in range(30):
        w = store.put_bytes(f"k/{i}", b"x" * i)
        assert w.key == f"k/{i}"
        assert store.head(f"k/{i}").size == i and store.read(f"k/{i}") == b"x" * i
    assert sorted(o.key for o in store.list("k/")) == sorted(f"k/{i}" for i in range(30))
    assert proxy.counts["slowdowns"] > 20 and store.retries == proxy.counts["slowdowns"]


def test_listing_pages_through_call(s3, proxy, bucket):
    client = s3.client()
    for i in range(1003):  # moto pages at 1000 keys
        client.put_object(Bucket=bucket, Key=f"p/{i:05d}", Body=b"")
    store = _store(s3, proxy.url, bucket, retry_backoff_ms=20)
    proxy.slowdown = 0.3
    assert [o.key for o in store.list("p/")] == [f"p/{i:05d}" for i in range(1003)]


def test_a_store_that_always_throttles_fails_within_the_deadline_naming_the_endpoint(s3, proxy, bucket):
    store = _store(s3, proxy.url, bucket, retry_deadline_ms=1500, retry_backoff_ms=50)
    proxy.slowdown = 1.0
    before = proxy.counts["requests"]
    with pytest.raises(StoreError) as e:
        store.put_bytes("k/x", b"data")
    tries = proxy.counts["requests"] - before
    msg = str(e.value)
    # it retried, then gave up at its deadline: full-jitter backoffs from 50 ms, doubling, fit about six tries in
    # 1.5 s (16 or more would need the last three draws all under the deadline: odds of about 1 in 10^5)
    assert 1 < tries < 16, tries
    assert "\n" not in msg and "SlowDown (503)" in msg and proxy.url in msg and "s3.retry.deadline.ms=1500" in msg


def test_a_dead_endpoint_fails_after_s3_part_retries(s3, bucket):
    store = _store(s3, "http://127.0.0.1:9", bucket, retry_backoff_ms=10)
    with pytest.raises(StoreError, match=r"Could not connect to the endpoint URL.*gave up after 4 attempt\(s\); "
                                         r"endpoint http://127.0.0.1:9, s3.part.retries=3,"):
        store.head("k")
    # counts, not timings: the first try and s3.part.retries (3) retries, then it gave up (long before the deadline)
    assert store.retries == 3


@pytest.mark.parametrize("rate", [0.05, 0.2, 0.4])
def test_sink_archives_exactly_once_through_slowdowns_resets_and_lost_responses(spark, kafka, s3, proxy, bucket,
                                                                              topic_name, rate):
    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, json_payloads(120), partition_of=lambda i: i % 2)
    # s3.part.retries 8, not the default 3: at rate 0.4 about one attempt in five ends in a reset or a lost
    # response before one succeeds, so four in a row (the default's give-up) hit one request of the batch's ~100
    # in about one run of ten (it failed a clean-clone run on 2026-11-26); giving up is the policy working, not
    # what this test is about
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "store.url": proxy.url, "flush.size": "15", "s3.retry.backoff.ms": "20", "s3.part.retries": "8"}))
    proxy.slowdown, proxy.reset, proxy.lost_response = rate, rate / 4, rate / 4
    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    proxy.slowdown = proxy.reset = proxy.lost_response = 0.0
    faults = proxy.counts["slowdowns"] + proxy.counts["resets"] + proxy.counts["lost_responses"]
    print(f"rate {rate}: {dict(proxy.counts)}; batch {res.summary()}")
    assert faults > 0 and res.s3_retries > 0
    assert res.records == 120 and f"{res.s3_retries} S3 retries" in res.summary()
    rows = manifest_rows(spark, cfg)
    check_chains(rows, {(topic_name, 0): 60, (topic_name, 1): 60})
    keys = [r.object_key for r in rows if r.kind == "object"]
    assert len(keys) == len(set(keys)) == 8
    check_exactly_once(spark, cfg, sent, "json")
    report = vacuum(None, cfg, retention_s=0.0)
    assert report.orphans == [] and report.uploads == [] and report.unknown == []


def test_sink_with_every_request_refused_fails_within_the_deadline_committing_nothing(spark, kafka, s3, proxy,
                                                                                      bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20))
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "store.url": proxy.url, "flush.size": "10", "s3.retry.deadline.ms": "2000", "s3.retry.backoff.ms": "50"}))
    job = SinkJob(spark, cfg)
    job.manifest.ensure()  # the table exists; then S3 starts refusing everything
    proxy.slowdown = 1.0
    before = proxy.counts["requests"]
    with pytest.raises((BatchFailedError, StoreError, ManifestError)) as e:
        job.run_batch(flush_tail=True)
    proxy.slowdown = 0.0
    tries = proxy.counts["requests"] - before
    print(f"{tries} requests: {e.value}")
    # the first request to fail for good names what it was for: the manifest (read before anything is written)
    # or an object upload
    msg = str(e.value)
    assert "\n" not in msg and "SlowDown" in msg and ("manifest" in msg or proxy.url in msg), msg
    # counts, not timings: it gave up by its bound, the manifest read (delta-rs) after its max_retries retries,
    # an upload at s3.retry.deadline.ms (SlowDown never counts against s3.part.retries)
    if "cannot read manifest" in msg:
        assert tries == int(RETRY_OPTIONS["max_retries"]) + 1, tries
    else:
        assert "s3.retry.deadline.ms=2000" in msg, msg
    assert manifest_rows(spark, cfg) == []
    SinkJob(spark, cfg).run_batch(flush_tail=True)  # the next run archives everything once
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 20})


def test_a_spark_manifest_on_a_dead_endpoint_fails_within_bounded_s3a_retries(spark):
    """S3A's own defaults retry a dead endpoint for many minutes; lakesink's S3A settings give up quickly."""
    from lakesink.manifest.table import Manifest

    bucket = f"dead-{int(time.time() * 1000)}"
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    hconf.set(f"fs.s3a.bucket.{bucket}.endpoint", "http://127.0.0.1:9")
    with pytest.raises(ManifestError) as e:
        Manifest(spark, f"s3a://{bucket}/_lakesink/manifest").exists()
    print(f"dead S3A endpoint: {e.value}")
    assert "\n" not in str(e.value) and f"s3a://{bucket}/_lakesink/manifest" in str(e.value)
    # counts, not timings: the session carries lakesink's bounded S3A retries, and the failed request made the SDK
    # attempts they allow (fs.s3a.attempts.maximum retries after the first), not S3A's defaults
    assert {k: hconf.get(k) for k in S3A_RETRY_CONF} == S3A_RETRY_CONF
    attempts = int(S3A_RETRY_CONF["fs.s3a.attempts.maximum"]) + 1
    assert f"(SDK Attempt Count: {attempts})" in str(e.value)
