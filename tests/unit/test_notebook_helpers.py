"""lakesink.notebook: show() picks Databricks' display() where it exists and plain output elsewhere, widgets take
parameters from dbutils.widgets on Databricks and keep the defaults elsewhere, and each chart draws its rows (no
Spark, no manifest: the rows are given; tests/integration/test_notebooks.py runs the charts on real archives in a
Jupyter kernel)."""
from __future__ import annotations

import datetime as dt
import sys

import pytest

from lakesink import notebook
from lakesink.errors import InvalidArgumentError

T0 = dt.datetime(2026, 11, 27, 3, tzinfo=dt.timezone.utc)


class Widgets:
    """dbutils.widgets as a Databricks notebook has it: text(name, default, label), get(name)."""

    def __init__(self, values: dict[str, str]):
        self.values, self.created = values, {}

    def text(self, name, default, label):
        self.created[name] = (default, label)
        self.values.setdefault(name, default)

    def get(self, name):
        return self.values[name]


class DbUtils:
    def __init__(self, values):
        self.widgets = Widgets(values)


@pytest.fixture
def main(monkeypatch):
    """The notebook's namespace (``__main__`` outside IPython), where Databricks puts display and dbutils."""
    module = sys.modules["__main__"]
    for name in ("display", "dbutils"):
        monkeypatch.delattr(module, name, raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    return monkeypatch, module


def test_widgets_keep_the_defaults_outside_databricks(main):
    ns = {"topic": "clicks", "partitions": 2, "manifest_location": None}
    assert notebook.widgets(ns, ["topic", "partitions", "manifest_location"]) == ns
    assert ns == {"topic": "clicks", "partitions": 2, "manifest_location": None}


def test_widgets_on_databricks_create_text_widgets_and_convert_their_values(main):
    monkeypatch, module = main
    dbutils = DbUtils({"topic": "orders", "partitions": "6", "produce_sample_data": "false", "manifest_location": ""})
    monkeypatch.setattr(module, "dbutils", dbutils, raising=False)
    ns = {"topic": "clicks", "partitions": 2, "produce_sample_data": True, "manifest_location": None, "bucket": "a"}
    got = notebook.widgets(ns, ["topic", "partitions", "produce_sample_data", "manifest_location", "bucket"])
    assert got == {"topic": "orders", "partitions": 6, "produce_sample_data": False, "manifest_location": None,
                   "bucket": "a"}
    assert ns["partitions"] == 6 and ns["bucket"] == "a"
    assert dbutils.widgets.created == {"topic": ("clicks", "topic"), "partitions": ("2", "partitions"),
                                       "produce_sample_data": ("true", "produce_sample_data"),
                                       "manifest_location": ("", "manifest_location"), "bucket": ("a", "bucket")}


@pytest.mark.parametrize("text, default, want", [("", None, None), ("s3a://b/m", None, "s3a://b/m"), ("7", 2, 7),
                                                 ("0.5", 1.0, 0.5), ("Yes", False, True), ("0", True, False),
                                                 (" x ", "d", " x ")])
def test_widget_values_take_the_defaults_type(text, default, want):
    assert notebook.convert(text, default) == want


@pytest.mark.parametrize("name, text, default, want", [
    ("produce_sample_data", "maybe", True, "widget produce_sample_data='maybe': true or false (the default is True)"),
    ("partitions", "six", 2, "widget partitions='six': not a number (the default is 2)")])
def test_a_widget_value_of_the_wrong_type_is_one_clear_error(main, name, text, default, want):
    monkeypatch, module = main
    monkeypatch.setattr(module, "dbutils", DbUtils({name: text}), raising=False)
    with pytest.raises(InvalidArgumentError) as e:
        notebook.widget(name, default)
    assert str(e.value) == want and e.value.exit_code == 2


def test_show_uses_databricks_display_where_it_exists(main, capsys):
    monkeypatch, module = main
    shown = []
    monkeypatch.setattr(module, "display", shown.append, raising=False)
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "16.4")
    fig = notebook.lag_figure([{"topic": "t", "kafka_partition": 0, "lag_records": 3}])
    notebook.show(fig)
    notebook.show({"a": 1})
    assert shown == [fig, {"a": 1}] and capsys.readouterr().out == ""


def test_show_prints_in_plain_python(main, capsys):
    notebook.show(notebook.lag_figure([{"topic": "t", "kafka_partition": 0, "lag_records": 3}]))
    notebook.show({"a": 1})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[Lag: records on the broker not yet archived: a ") and out[0].endswith(
        "-byte PNG, drawn in a notebook]")
    assert out[1] == "{'a': 1}"


def hourly_rows():
    return [{"topic": t, "hour": T0 + dt.timedelta(hours=h), "records": 10 * h + n, "bytes": 100 * h + n}
            for n, t in enumerate(("a", "b")) for h in range(4)]


def test_hourly_figure_draws_records_and_bytes_per_topic():
    fig = notebook.hourly_figure(hourly_rows())
    records_ax, bytes_ax = fig.axes
    assert [line.get_label() for line in records_ax.lines] == ["a", "b"]
    assert list(records_ax.lines[1].get_ydata()) == [1, 11, 21, 31]
    assert list(bytes_ax.lines[0].get_ydata()) == [0, 100, 200, 300]
    assert fig.get_label() != notebook.EMPTY and notebook.png(fig).startswith(b"\x89PNG")


def test_sizes_figure_counts_every_object_once():
    rows = [{"topic": "a", "size_bytes": s} for s in (100, 2_000, 3_000, 50_000)] + [{"topic": "b", "size_bytes": 700}]
    fig = notebook.sizes_figure(rows)
    (ax,) = fig.axes
    top = [patch.get_y() + patch.get_height() for patch in ax.patches]  # stacked: b's bars sit on a's
    assert sum(p.get_height() for p in ax.patches) == 5 and max(top) >= 1
    assert "5 objects; median 2,000 B" in ax.get_xlabel() and ax.get_xscale() == "log"
    (close,) = notebook.sizes_figure([{"topic": "a", "size_bytes": s} for s in (138, 145, 152)]).axes
    assert close.get_xscale() == "linear" and sum(p.get_height() for p in close.patches) == 3


def test_lag_figure_has_a_bar_per_partition():
    rows = [{"topic": "t", "kafka_partition": p, "lag_records": v} for p, v in ((1, 30), (0, 0), (2, None))]
    (ax,) = notebook.lag_figure(rows).axes
    assert [p.get_height() for p in ax.patches] == [0, 30, 0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["t-0", "t-1", "t-2"]


def test_schema_figure_puts_each_version_on_its_own_row():
    rows = [{"topic": "users", "schema_subject": "users-value", "schema_version": v, "schema_id": 10 + v,
             "min_timestamp": T0 + dt.timedelta(minutes=30 * v), "max_timestamp": T0 + dt.timedelta(minutes=30 * v + 20),
             "first_offset": 100 * v, "last_offset": 100 * v + 99, "records": 100} for v in (2, 1)]
    rows.append({"topic": "clicks", "schema_subject": None, "schema_version": None, "schema_id": None,
                 "min_timestamp": T0, "max_timestamp": T0, "first_offset": 0, "last_offset": 9, "records": 10})
    (ax,) = notebook.schema_figure(rows).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["clicks: no schema", "users: v1 (id 11)",
                                                            "users: v2 (id 12)"]
    assert len(ax.patches) == 3 and all(p.get_width() > 0 for p in ax.patches)
    assert "offsets 200..299, 100 records" in [t.get_text() for t in ax.texts]


def test_coverage_figure_marks_each_gap_kind_with_its_offsets():
    rows = [{"topic": "a", "kafka_partition": 0, "start_offset": s, "end_offset": e, "kind": k}
            for s, e, k in ((0, 49, "object"), (50, 60, "unarchived"), (61, 120, "object"), (121, 129, "skipped"))]
    rows.append({"topic": "a", "kafka_partition": 1, "start_offset": 0, "end_offset": 99, "kind": "object"})
    (ax,) = notebook.coverage_figure(rows).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["objects: 210 offsets", "skipped: 9 offsets",
                                                                   "unarchived: 11 offsets"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a-0", "a-1"]
    unarchived = [c for c in ax.collections if c.get_facecolor()[0][:3] == pytest.approx(
        tuple(int(notebook.KIND_COLOURS["unarchived"][i:i + 2], 16) / 255 for i in (1, 3, 5)))]
    assert len(unarchived) == 1 and unarchived[0].get_paths()[0].get_extents().x0 == 50


def test_coverage_merges_the_overlapping_spans_of_interleaved_objects():
    """A field partitioner's objects of one partition interleave: offsets are counted once."""
    spans = ((0, 40, "object"), (2, 49, "object"), (50, 70, "object"), (90, 99, "object"), (71, 89, "unarchived"))
    rows = [{"topic": "a", "kafka_partition": 0, "start_offset": s, "end_offset": e, "kind": k} for s, e, k in spans]
    assert notebook.merged([(0, 40), (2, 49), (50, 70), (90, 99)]) == [(0, 71), (90, 10)]
    (ax,) = notebook.coverage_figure(rows).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["objects: 81 offsets", "unarchived: 19 offsets"]


def test_coverage_without_gaps_says_so():
    rows = [{"topic": "a", "kafka_partition": 0, "start_offset": 0, "end_offset": 9, "kind": "object"}]
    (ax,) = notebook.coverage_figure(rows).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["objects: 10 offsets", "no gap"]


@pytest.mark.parametrize("draw", [notebook.hourly_figure, notebook.sizes_figure, notebook.lag_figure,
                                  notebook.schema_figure, notebook.coverage_figure])
def test_a_chart_of_no_rows_says_so_and_is_labelled_empty(draw):
    fig = draw([])
    assert fig.get_label() == notebook.EMPTY
    assert any(t.get_text() for ax in fig.axes for t in ax.texts)
    assert notebook.png(fig).startswith(b"\x89PNG")


def test_properties_prints_the_keys_one_a_line_with_secrets_masked():
    from lakesink import SinkConfig

    settings = {"name": "j", "topics": "a,b", "s3.bucket.name": "bkt", "flush.size": "50",
                "kafka.bootstrap.servers": "k:9092", "aws.access.key.id": "AKIA", "aws.secret.access.key": "s3cr3t!",
                "manifest.location": "s3a://bkt/_lakesink/j"}
    text = notebook.properties(SinkConfig.from_dict(settings), settings)
    lines = text.splitlines()
    assert [line.split(" = ")[0] for line in lines] == list(settings)
    assert "topics = a,b" in lines and "flush.size = 50" in lines and "s3cr3t!" not in text
    assert max(map(len, lines)) < 100


def test_a_chart_without_matplotlib_names_the_extra(monkeypatch):
    import importlib.util

    from lakesink.errors import NotInstalledError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(NotInstalledError, match=r"need matplotlib, which is not installed: "
                                                r"pip install 'lakesink\[notebooks\]'") as e:
        notebook.lag_figure([])
    assert e.value.exit_code == 5


def obj(topic: str, part: int, first: int, last: int, rs: int, re_: int, size: int, ts_ms: int):
    from lakesink.manifest.rows import object_row

    key = f"topics/{topic}/partition={part}/{topic}+{part}+{first:010d}.json"
    return object_row(topic, part, rs, re_, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                      side_files=(), format="json", compression=None, size_bytes=size, etag="e", version_id=None,
                      min_timestamp_ms=ts_ms, max_timestamp_ms=ts_ms + 60_000)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    """A path manifest written by delta-rs on the local disk (the DuckDB route, no JVM): orders-0 objects 0-3 and
    4-12 of a commit range 4-15 (13-15 unarchived) and an advance 16-17; orders-1 one object 0-11, an hour later."""
    from lakesink.manifest.deltars import DeltaRsManifest
    from lakesink.manifest.rows import advance_row

    location = str(tmp_path_factory.mktemp("nb") / "manifest")
    m = DeltaRsManifest(location)
    m.ensure()
    t0 = int(T0.timestamp() * 1000)
    m.commit("j", 0, "r1", [obj("orders", 0, 0, 3, 0, 3, 100, t0), obj("orders", 0, 4, 12, 4, 15, 300, t0 + 60_000),
                            obj("orders", 1, 0, 11, 0, 11, 200, t0 + 3_600_000)])
    m.commit("j", 1, "r1", [advance_row("orders", 0, 16, 17, "transaction markers")])
    m.commit("other-job", 0, "r2", [obj("secret", 0, 0, 99, 0, 99, 5, t0)])
    return {"name": "j", "topics": "orders", "s3.bucket.name": "bkt", "flush.size": "10", "kafka.bootstrap.servers": "127.0.0.1:9",
            "manifest.location": location}


def test_frame_is_a_query_over_the_views_as_pandas(config):
    df = notebook.frame(config, "SELECT topic, kafka_partition, next_offset FROM committed_offsets")
    assert df.to_dict("records") == [{"topic": "orders", "kafka_partition": 0, "next_offset": 18},
                                     {"topic": "orders", "kafka_partition": 1, "next_offset": 12}]


def test_the_chart_queries_run_on_a_path_manifest_without_spark(config):
    hourly = notebook.query(config, notebook.HOURLY_SQL)
    assert [(r["hour"].hour, r["records"], r["bytes"]) for r in hourly] == [(3, 13, 400), (4, 12, 200)]
    assert sorted(r["size_bytes"] for r in notebook.query(config, notebook.SIZES_SQL)) == [100, 200, 300]
    (schemaless,) = notebook.query(config, notebook.SCHEMA_SQL)
    assert (schemaless["schema_version"], schemaless["records"]) == (None, 25)
    coverage = [(r["kafka_partition"], r["start_offset"], r["end_offset"], r["kind"])
                for r in notebook.query(config, notebook.COVERAGE_SQL)]
    assert coverage == [(0, 0, 3, "object"), (0, 4, 12, "object"), (0, 13, 15, "unarchived"), (0, 16, 17, "advance"),
                        (1, 0, 11, "object")]
    (ax,) = notebook.coverage_chart(config).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["objects: 25 offsets", "advance: 2 offsets",
                                                                   "unarchived: 3 offsets"]
    for chart in (notebook.hourly_chart, notebook.sizes_chart, notebook.schema_chart):
        assert chart(config).get_label() != notebook.EMPTY
