"""One rule for "path or catalog table" (issue 26 item 4, lakesink.manifest.location) and no archive object inside
the manifest or metrics table's directory (item 5, lakesink.config.layout)."""
from __future__ import annotations

import os

import pytest

from lakesink.config import SinkConfig
from lakesink.errors import BadValue, ConfigError
from lakesink.manifest.deltars import table_uri
from lakesink.manifest.location import parse_location, resolve_location
from lakesink.manifest.metrics import MetricsTable, metrics_location
from lakesink.manifest.table import ddl

BASE = {"name": "job", "topics": "orders", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/_lakesink/manifest", "kafka.bootstrap.servers": "localhost:9092"}


def problems(values: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, **values})
    return {p.key: p.message for p in ei.value.problems}


# ------------------------------------------------------------------------------------------- the parser

@pytest.mark.parametrize("text, kind, scheme, bucket, path, uri", [
    ("data/manifest", "path", "file", "", "/cwd/data/manifest", "/cwd/data/manifest"),
    ("./manifest", "path", "file", "", "/cwd/manifest", "/cwd/manifest"),
    ("file:/srv/m", "path", "file", "", "/srv/m", "/srv/m"),
    ("file:///srv/m", "path", "file", "", "/srv/m", "/srv/m"),
    ("file://localhost/srv/m", "path", "file", "", "/srv/m", "/srv/m"),
    ("s3a://b/p", "path", "s3", "b", "p", "s3://b/p"),
    ("s3://b/p/", "path", "s3", "b", "p", "s3://b/p"),
    ("s3n://b/a/p", "path", "s3", "b", "a/p", "s3://b/a/p"),
    ("/srv/lakesink/manifest", "path", "file", "", "/srv/lakesink/manifest", "/srv/lakesink/manifest"),
    ("db.tbl", "catalog", "", "", "", "db.tbl"),
    ("cat.db.tbl", "catalog", "", "", "", "cat.db.tbl"),
    ("manifest", "catalog", "", "", "", "manifest"),
    ("db.`my-manifest`", "catalog", "", "", "", "db.`my-manifest`"),
])
def test_one_parser_tells_a_path_from_a_catalog_table(text, kind, scheme, bucket, path, uri):
    loc = parse_location(text, cwd="/cwd")
    assert (loc.kind, loc.scheme, loc.bucket, loc.path, loc.uri) == (kind, scheme, bucket, path, uri)
    assert loc.is_path == (kind == "path")
    assert (loc.name == text) == (kind == "catalog")


@pytest.mark.parametrize("text, fragment", [
    ("", "is empty"), ("s3a://", "names no bucket"), ("s3:///p", "names no bucket"),
    ("file:relative/m", "relative file: URI"), ("file://otherhost/m", "names host 'otherhost'"),
    ("my manifest", "is neither a path"), ("a..b", "is neither a path"), ("a.b.c.d", "is neither a path"),
])
def test_a_location_that_is_neither_is_refused(text, fragment):
    with pytest.raises(BadValue, match=fragment):
        parse_location(text)


def test_relative_paths_are_resolved_against_the_current_directory_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_location("data/manifest") == str(tmp_path / "data" / "manifest")
    assert resolve_location("s3a://b/p") == "s3a://b/p" and resolve_location("db.tbl") == "db.tbl"
    cfg = SinkConfig.from_dict({**BASE, "manifest.location": "data/manifest", "metrics.location": "./m2"})
    assert cfg.manifest_location == str(tmp_path / "data" / "manifest")
    assert cfg.metrics_location == str(tmp_path / "m2")
    monkeypatch.chdir(tmp_path.parent)  # a later directory change does not move the tables
    assert metrics_location(cfg) == str(tmp_path / "m2")
    assert MetricsTable(metrics_location(cfg)).uri == str(tmp_path / "m2")


def test_the_metrics_table_of_a_relative_path_manifest_is_a_path_table(tmp_path, monkeypatch):
    """The reported split: data/manifest was a path to the validator and the manifest, its metrics table
    data/manifest_metrics a catalog table to MetricsTable (saveAsTable("data/manifest_metrics"))."""
    monkeypatch.chdir(tmp_path)
    cfg = SinkConfig.from_dict({**BASE, "manifest.location": "data/manifest"})
    assert cfg.manifest_engine == "delta-rs"
    table = MetricsTable(metrics_location(cfg))
    assert table.is_path and table.uri == str(tmp_path / "data" / "manifest_metrics")
    # and a relative path given to the table directly (not through a config) is a path as well
    assert MetricsTable("data/manifest_metrics").is_path


@pytest.mark.parametrize("manifest, metrics, is_path", [
    ("s3a://b/_lakesink/manifest/", "s3a://b/_lakesink/manifest_metrics", True),
    ("s3://b/m", "s3://b/m_metrics", True),
    ("file:///srv/m", "file:///srv/m_metrics", True),
    ("/srv/m", "/srv/m_metrics", True),
    ("db.manifest", "db.manifest_metrics", False),
    ("cat.db.manifest", "cat.db.manifest_metrics", False),
])
def test_the_default_metrics_table_is_the_same_kind_as_the_manifest(manifest, metrics, is_path):
    cfg = SinkConfig.from_dict({**BASE, "manifest.location": manifest})
    assert metrics_location(cfg) == metrics
    assert MetricsTable(metrics).is_path is is_path
    assert (cfg.manifest_engine == "delta-rs") is is_path


def test_every_call_site_asks_the_same_rule():
    for text in ("data/manifest", "file:/srv/m", "s3a://b/p", "/srv/m", "db.tbl", "cat.db.tbl"):
        loc = parse_location(text)
        assert MetricsTable(text).is_path is loc.is_path
        assert ddl(text).startswith(f"CREATE TABLE IF NOT EXISTS {loc.sql_target} (")
        if loc.is_path:
            assert table_uri(text) == loc.uri
    assert table_uri("s3a://b/p") == "s3://b/p" and table_uri("file:///srv/m") == "/srv/m"
    assert ddl("data/manifest").startswith(f"CREATE TABLE IF NOT EXISTS delta.`{os.getcwd()}/data/manifest` (")


def test_config_refuses_a_location_that_is_neither_and_delta_rs_for_a_catalog_table():
    assert "is neither a path" in problems({"manifest.location": "my manifest"})["manifest.location"]
    assert "is neither a path" in problems({"metrics.location": "a b"})["metrics.location"]
    # reported after validation instead of being lost (it was computed after the problems were raised)
    assert "use manifest.engine=spark" in problems({"manifest.location": "db.tbl",
                                                    "manifest.engine": "delta-rs"})["manifest.engine"]


# ----------------------------------------------------------------------- objects inside a table (item 5)

def test_lakesink_dir_and_topic_manifest_is_refused():
    msg = problems({"topics.dir": "_lakesink", "topics": "manifest"})["topics.dir"]
    assert "topic 'manifest'" in msg and "s3a://bkt/_lakesink/manifest" in msg and "VACUUM" in msg


def test_the_default_metrics_table_is_protected_too():
    msg = problems({"topics.dir": "_lakesink", "topics": "manifest_metrics"})["topics.dir"]
    assert "topic 'manifest_metrics'" in msg and "metrics table s3a://bkt/_lakesink/manifest_metrics" in msg
    msg = problems({"topics.dir": "x", "topics": "m", "metrics.location": "s3a://bkt/x/m/stats"})["topics.dir"]
    assert "metrics table s3a://bkt/x/m/stats" in msg


@pytest.mark.parametrize("manifest", ["s3://bkt/_lakesink/manifest", "s3a://bkt/_lakesink/manifest/",
                                      "s3n://bkt/_lakesink/manifest"])
def test_s3_and_s3a_name_the_same_place(manifest):
    msg = problems({"manifest.location": manifest, "topics.dir": "_lakesink", "topics": "manifest"})["topics.dir"]
    assert "topic 'manifest'" in msg


def test_a_regex_that_could_match_the_tables_directory_is_refused():
    msg = problems({"topics": None, "topics.regex": "man.*", "topics.dir": "_lakesink"})["topics.dir"]
    assert "'manifest' (matched by topics.regex 'man.*')" in msg and "s3a://bkt/_lakesink/manifest " in msg
    assert "also topic 'manifest_metrics' and the metrics table s3a://bkt/_lakesink/manifest_metrics" in msg
    SinkConfig.from_dict({**BASE, "topics": None, "topics.regex": "orders.*", "topics.dir": "_lakesink"})


def test_a_table_inside_a_topics_directory_and_topics_dir_inside_a_table_are_refused():
    assert "topic 'orders'" in problems({"manifest.location": "s3a://bkt/topics/orders/manifest"})["topics.dir"]
    msg = problems({"topics.dir": "_lakesink/manifest/data"})["topics.dir"]
    assert "every topic's archive objects inside the manifest table" in msg
    assert "every topic's" in problems({"manifest.location": "s3a://bkt"})["topics.dir"]  # the bucket's root


def test_a_blank_topics_dir_and_another_directory_delimiter():
    assert "topic 'manifest'" in problems({"topics.dir": "", "topics": "manifest",
                                           "manifest.location": "s3a://bkt/manifest"})["topics.dir"]
    # directory.delim=- : keys are lake-manifest-..., not under lake/manifest/
    SinkConfig.from_dict({**BASE, "topics.dir": "lake", "topics": "manifest", "directory.delim": "-",
                          "manifest.location": "s3a://bkt/lake/manifest"})
    msg = problems({"topics.dir": "lake", "topics": "manifest", "directory.delim": "-",
                    "manifest.location": "s3a://bkt/lake-manifest-x"})["topics.dir"]
    assert "topic 'manifest'" in msg


def test_a_local_store_and_a_local_manifest(tmp_path):
    store = {"store.url": f"file://{tmp_path}/store", "topics.dir": "_lakesink", "topics": "manifest"}
    msg = problems({**store, "manifest.location": str(tmp_path / "store" / "bkt" / "_lakesink" / "manifest")})
    assert "topic 'manifest'" in msg["topics.dir"]
    SinkConfig.from_dict({**BASE, **store, "manifest.location": str(tmp_path / "manifest")})


def test_safe_layouts_are_still_accepted():
    for extra in ({}, {"topics.dir": "_lakesink", "topics": "orders"}, {"topics": "manifest"},
                  {"topics.dir": "_lakesink", "topics": "manifest",
                   "manifest.location": "s3a://other/_lakesink/manifest"},
                  {"topics.dir": "_lakesink", "topics": "manifest", "manifest.location": "db.manifest"},
                  {"topics.dir": "_lakesink", "topics": "manifest_metrics", "metrics.location": "none"},
                  {"topics.dir": "_lakesink", "topics": "manifestx"}):
        SinkConfig.from_dict({**BASE, **extra})


def test_a_metrics_table_inside_the_manifest_is_refused():
    msg = problems({"metrics.location": "s3://bkt/_lakesink/manifest/metrics"})["metrics.location"]
    assert "inside (or holds) the manifest table s3a://bkt/_lakesink/manifest" in msg
