"""Notebook helpers: show a result the way the notebook it runs in shows things best, take parameters from
Databricks widgets, and draw the archive's pictures (matplotlib PNGs) from the manifest's views.

* :func:`show` -- Databricks' ``display()`` where it exists (a Spark or pandas DataFrame as its table, a figure as
  its image); in another IPython kernel (Jupyter, VS Code) a DataFrame's first rows as an HTML table and a figure
  as a PNG; in plain Python ``DataFrame.show()`` / ``print`` and one line per figure.
* :func:`widget` / :func:`widgets` -- on Databricks one text widget per parameter (a job's parameters fill them),
  its value converted to the default's type; elsewhere the default, unchanged.
* :func:`frame` -- one query over the manifest's views as a pandas DataFrame, the fast way (below).
* The pictures, each from one query over the views ``lakesink sql`` knows (``docs/sql.md``), run by
  :func:`lakesink.driver.sql.run_queries`: DuckDB over the path manifest read by delta-rs (no JVM), Spark for a
  catalog table (pass ``spark=``). Each ``*_chart(config)`` queries and draws; each ``*_figure(rows)`` only draws
  (rows as dicts, the query's columns), so a chart can be drawn from rows you got elsewhere.

  =======================  ==================================================================
  :func:`hourly_chart`     records and bytes per hour of record time, one line per topic
  :func:`sizes_chart`      the object size distribution (a histogram; log-spaced bins over a decade or more)
  :func:`lag_chart`        records waiting per topic-partition (the ``lag`` view: asks the broker)
  :func:`schema_chart`     each value schema version's time span per topic (``schema_history``)
  :func:`coverage_chart`   per topic-partition, the offsets objects hold and the gaps, by kind
  =======================  ==================================================================

matplotlib is the ``notebooks`` extra (``pip install 'lakesink[notebooks]'``); figures are drawn on a
:class:`matplotlib.figure.Figure` of their own (no pyplot state, no GUI backend)."""
from __future__ import annotations

import builtins
import io
import os
import sys
from typing import Any, Iterable, Mapping

#: One query per picture (Spark SQL, as docs/sql.md writes it: it runs on both engines).
HOURLY_SQL = """
SELECT topic, date_trunc('HOUR', min_timestamp) AS hour, sum(record_count) AS records, sum(size_bytes) AS bytes
FROM objects
GROUP BY topic, date_trunc('HOUR', min_timestamp)
ORDER BY topic, hour"""
SIZES_SQL = "SELECT topic, size_bytes FROM objects ORDER BY topic, size_bytes"
LAG_SQL = "SELECT topic, kafka_partition, lag_records FROM lag ORDER BY topic, kafka_partition"
SCHEMA_SQL = """
SELECT topic, schema_subject, schema_version, schema_id, min_timestamp, max_timestamp, first_offset, last_offset,
       records
FROM schema_history
ORDER BY topic, min_timestamp, schema_version"""
# filtered rows are notes on offsets inside object spans (docs/sql.md): not a range of their own
COVERAGE_SQL = """
SELECT topic, kafka_partition, first_offset AS start_offset, last_offset AS end_offset, 'object' AS kind
FROM objects
UNION ALL
SELECT topic, kafka_partition, start_offset, end_offset, kind
FROM gaps WHERE kind <> 'filtered'
ORDER BY topic, kafka_partition, start_offset"""

#: Colours of the offset coverage chart, by row kind (objects green, every gap kind a warm colour).
KIND_COLOURS = {"object": "#4c9a5b", "unarchived": "#d62728", "advance": "#ff7f0e", "skipped": "#8c1c13",
                "expired": "#7f7f7f"}
GAP_COLOUR = "#e377c2"
#: The label of a figure that had nothing to draw (:func:`show` puts it in the output's metadata).
EMPTY = "lakesink: nothing to draw"


# --- where we run -------------------------------------------------------------------------------------------

def on_databricks() -> bool:
    """Whether this is a Databricks runtime (its clusters set ``DATABRICKS_RUNTIME_VERSION``)."""
    return bool(os.environ.get("DATABRICKS_RUNTIME_VERSION"))


def ipython() -> Any:
    """The running IPython shell (a Jupyter or Databricks kernel), or None in plain Python."""
    if "IPython" not in sys.modules:  # a kernel has imported it; plain Python need not pay for the import
        return None
    from IPython import get_ipython

    return get_ipython()


def notebook_name(name: str) -> Any:
    """What ``name`` is in the notebook's own namespace (where Databricks puts ``display`` and ``dbutils``): the
    IPython user namespace, else ``__main__``, else the builtins; None when nowhere."""
    shell = ipython()
    spaces = [shell.user_ns] if shell is not None else []
    spaces += [vars(sys.modules["__main__"])] if "__main__" in sys.modules else []
    for space in spaces:
        if name in space:
            return space[name]
    return getattr(builtins, name, None)


# --- show ---------------------------------------------------------------------------------------------------

def is_figure(obj: Any) -> bool:
    return type(obj).__module__.startswith("matplotlib.") and hasattr(obj, "savefig")


def is_spark_frame(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.") and hasattr(obj, "toPandas") and hasattr(obj, "show")


def png(fig: Any, dpi: int = 100) -> bytes:
    """The PNG of a matplotlib figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def show(obj: Any, n: int = 20) -> None:
    """Show ``obj`` (a Spark or pandas DataFrame, a matplotlib figure, anything else) as this notebook shows it best:
    Databricks' ``display()``; in another IPython kernel the first ``n`` rows of a Spark DataFrame as an HTML table
    and a figure as a PNG image; in plain Python ``DataFrame.show(n)``, ``print`` and one line naming a figure."""
    display = notebook_name("display") if on_databricks() else None
    if display is not None:
        display(obj)
        return
    shell = ipython()
    if shell is not None:
        from IPython.display import Image
        from IPython.display import display as ipython_display

        if is_figure(obj):  # a PNG whatever the kernel's matplotlib backend; the title and emptiness as metadata
            ipython_display(Image(data=png(obj), format="png"),
                            metadata={"lakesink": {"title": obj.get_suptitle(), "empty": obj.get_label() == EMPTY}})
        elif is_spark_frame(obj):
            ipython_display(obj.limit(n).toPandas())
        else:
            ipython_display(obj)
        return
    if is_figure(obj):
        title = obj.get_suptitle() or "figure"
        print(f"[{title}: a {len(png(obj)):,}-byte PNG, drawn in a notebook]")
    elif is_spark_frame(obj):
        obj.show(n, truncate=False)
    else:
        print(obj)


def properties(config: Any, keys: Iterable[str] | None = None) -> str:
    """``config`` as .properties lines, one key a line, secrets masked: the ``keys`` given (in their order), or
    every key with a value."""
    from lakesink.driver.archive import as_config

    values = as_config(config).as_dict(redact=True)
    names = list(keys) if keys is not None else [k for k, v in values.items() if v not in (None, "", [], {})]
    text = {k: ",".join(map(str, values[k])) if isinstance(values[k], list) else values[k] for k in names}
    return "\n".join(f"{k} = {'' if v is None else str(v).lower() if isinstance(v, bool) else v}"
                     for k, v in text.items())


# --- widgets ------------------------------------------------------------------------------------------------

def convert(value: str, default: Any, name: str = "value") -> Any:
    """A widget's text as the type of ``default``: '' is None when the default is None; bools take
    true/false/yes/no/1/0; ints and floats parse. A text that does not is one InvalidArgumentError naming the
    widget ``name``."""
    from lakesink.errors import InvalidArgumentError

    text = value.strip()
    if isinstance(default, bool):
        if text.lower() in ("true", "yes", "1"):
            return True
        if text.lower() in ("false", "no", "0"):
            return False
        raise InvalidArgumentError(f"widget {name}={value!r}: true or false (the default is {default})")
    if default is None:
        return text or None
    if isinstance(default, (int, float)):
        try:
            return type(default)(text)
        except ValueError:
            raise InvalidArgumentError(f"widget {name}={value!r}: not a number (the default is {default})") from None
    return value


def widget(name: str, default: Any = None, label: str | None = None) -> Any:
    """The parameter ``name``: on Databricks a text widget (created with ``default`` as its text; a job's parameter
    of that name fills it), its value converted to ``default``'s type (:func:`convert`); elsewhere ``default``."""
    dbutils = notebook_name("dbutils")
    if dbutils is None:
        return default
    text = "" if default is None else (str(default).lower() if isinstance(default, bool) else str(default))
    dbutils.widgets.text(name, text, label or name)
    return convert(dbutils.widgets.get(name), default, name)


def widgets(namespace: dict, names: Iterable[str]) -> dict:
    """:func:`widget` for each of ``names``, with ``namespace[name]`` as its default; the values are written back
    into ``namespace`` (a notebook passes ``globals()``) and returned. Keep secrets out: a widget shows its value."""
    values = {name: widget(name, namespace.get(name)) for name in names}
    namespace.update(values)
    return values


# --- the pictures -------------------------------------------------------------------------------------------

def query(config: Any, sql: str, *, spark: Any = None) -> list[dict]:
    """The rows of one query over the manifest's views, as dicts (:func:`lakesink.driver.sql.run_queries`)."""
    from lakesink.driver.archive import as_config
    from lakesink.driver.sql import run_queries

    (result,) = run_queries(as_config(config), sql, spark=spark, limit=None)
    return [dict(zip(result.columns, row)) for row in result.rows]


def require_matplotlib() -> None:
    """NotInstalledError (one line, naming the extra that brings it) when matplotlib is absent."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        from lakesink.errors import NotInstalledError

        raise NotInstalledError("lakesink.notebook's charts need matplotlib, which is not installed: "
                                "pip install 'lakesink[notebooks]'")


def frame(config: Any, sql: str, *, spark: Any = None) -> Any:
    """The rows of one query over the manifest's views as a pandas DataFrame, by the route ``lakesink sql`` takes:
    DuckDB over a path manifest (about a second, no JVM), Spark for a catalog table (``spark=`` needed then). For a
    Spark DataFrame use :func:`lakesink.sql`."""
    import pandas as pd

    from lakesink.driver.archive import as_config
    from lakesink.driver.sql import run_queries

    (result,) = run_queries(as_config(config), sql, spark=spark, limit=None)
    return pd.DataFrame.from_records([tuple(r) for r in result.rows], columns=result.columns)


def new_figure(title: str, rows: int = 1, height: float = 3.2, width: float = 9.0) -> tuple[Any, list]:
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), layout="constrained")
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0].tolist()
    fig.suptitle(title)
    return fig, axes


def empty(ax: Any, what: str) -> None:
    """Say ``what`` in place of a chart, and label the figure :data:`EMPTY`."""
    ax.figure.set_label(EMPTY)
    ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def hourly_figure(rows: Iterable[Mapping]) -> Any:
    """Records and bytes per hour of record time, one line (with markers) per topic."""
    rows = list(rows)
    fig, (records_ax, bytes_ax) = new_figure("Archived records and bytes per hour (record time, UTC)", rows=2)
    if not rows:
        empty(records_ax, "no archived object yet")
        empty(bytes_ax, "no archived object yet")
        return fig
    for topic in sorted({r["topic"] for r in rows}):
        mine = sorted((r for r in rows if r["topic"] == topic), key=lambda r: r["hour"])
        hours = [r["hour"] for r in mine]
        records_ax.plot(hours, [r["records"] for r in mine], marker="o", label=topic)
        bytes_ax.plot(hours, [r["bytes"] for r in mine], marker="o", label=topic)
    records_ax.set_ylabel("records")
    bytes_ax.set_ylabel("bytes")
    records_ax.legend(loc="best", fontsize="small")
    for ax in (records_ax, bytes_ax):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    bytes_ax.set_xlabel("hour")
    return fig


def sizes_figure(rows: Iterable[Mapping]) -> Any:
    """The object size distribution: a histogram of ``size_bytes``, stacked by topic, on log-spaced bins and a log
    axis when the sizes span a decade or more."""
    import numpy as np

    rows = [r for r in rows if r["size_bytes"] is not None]
    fig, (ax,) = new_figure("Object size distribution")
    if not rows:
        empty(ax, "no archived object yet")
        return fig
    sizes = [max(int(r["size_bytes"]), 1) for r in rows]
    low, high = min(sizes), max(sizes)
    log = high >= 10 * low  # sizes over a decade or more: log-spaced bins on a log axis
    bins = (np.geomspace(low, high * 1.0001, 20) if log else
            np.linspace(low, high + 1, 16) if high > low else np.array([low - 0.5, high + 0.5]))
    topics = sorted({r["topic"] for r in rows})
    ax.hist([[max(int(r["size_bytes"]), 1) for r in rows if r["topic"] == t] for t in topics], bins=bins,
            stacked=True, label=topics)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"object size, bytes ({len(sizes):,} objects; median {int(np.median(sizes)):,} B)")
    ax.set_ylabel("objects")
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return fig


def lag_figure(rows: Iterable[Mapping]) -> Any:
    """Records waiting to be archived, one bar per topic-partition."""
    rows = sorted(rows, key=lambda r: (r["topic"], r["kafka_partition"]))
    fig, (ax,) = new_figure("Lag: records on the broker not yet archived")
    if not rows:
        empty(ax, "no partition of the job's topics on the broker")
        return fig
    labels = [f"{r['topic']}-{r['kafka_partition']}" for r in rows]
    values = [r["lag_records"] or 0 for r in rows]
    bars = ax.bar(range(len(rows)), values, color="#1f77b4")
    ax.bar_label(bars, labels=[f"{v:,}" for v in values], fontsize="small")
    ax.set_xticks(range(len(rows)), labels, rotation=30 if len(rows) > 8 else 0, ha="right" if len(rows) > 8 else "center")
    ax.set_ylabel("records")
    ax.set_ylim(bottom=0, top=max(max(values) * 1.15, 1))
    ax.grid(axis="y", alpha=0.3)
    return fig


def schema_label(r: Mapping) -> str:
    if r.get("schema_version") is None and r.get("schema_id") is None:
        return f"{r['topic']}: no schema"
    return f"{r['topic']}: v{r['schema_version']} (id {r['schema_id']})"


def schema_figure(rows: Iterable[Mapping]) -> Any:
    """Each value schema version's record-time span per topic, a horizontal bar from its first to its last
    record, labelled with the offsets and records it covers."""
    from matplotlib import dates

    rows = [r for r in rows if r["min_timestamp"] is not None and r["max_timestamp"] is not None]
    rows.sort(key=lambda r: (r["topic"], r["min_timestamp"]))
    fig, (ax,) = new_figure("Schema versions over time (record time, UTC)", height=max(2.2, 0.6 * len(rows) + 1.2))
    if not rows:
        empty(ax, "no archived object yet")
        return fig
    starts = [dates.date2num(r["min_timestamp"]) for r in rows]
    ends = [dates.date2num(r["max_timestamp"]) for r in rows]
    span = max(max(ends) - min(starts), 1 / 86400)
    widths = [max(e - s, span / 200) for s, e in zip(starts, ends)]
    ax.barh(range(len(rows)), widths, left=starts, height=0.5, color="#9467bd")
    for i, r in enumerate(rows):
        ax.text(starts[i], i - 0.3, f"offsets {r['first_offset']}..{r['last_offset']}, {r['records']:,} records",
                fontsize="small", va="bottom")
    ax.set_yticks(range(len(rows)), [schema_label(r) for r in rows])
    ax.set_ylim(len(rows) - 0.4, -0.9)  # the first version on top, room for its label
    ax.xaxis_date()
    ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    ax.grid(axis="x", alpha=0.3)
    return fig


def merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive offset ranges ``(start, end)`` merged where they overlap or touch, as ``(start, width)``: the
    objects of a field or time partitioner interleave, their ``[first_offset, last_offset]`` spans overlap."""
    out: list[list[int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(start, end - start + 1) for start, end in out]


def coverage_figure(rows: Iterable[Mapping]) -> Any:
    """Per topic-partition (one row each), the offset ranges objects hold (their spans merged) and the gaps (no
    archived record), each gap kind in its colour and listed in the legend with how many offsets it covers."""
    from matplotlib.patches import Patch

    rows = sorted(rows, key=lambda r: (r["topic"], r["kafka_partition"], r["start_offset"]))
    keys = sorted({(r["topic"], r["kafka_partition"]) for r in rows})
    fig, (ax,) = new_figure("Offset coverage: archived objects and gaps", height=max(2.2, 0.55 * len(keys) + 1.4))
    if not rows:
        empty(ax, "nothing committed yet")
        return fig
    offsets: dict[str, int] = {}
    for y, key in enumerate(keys):
        mine = [r for r in rows if (r["topic"], r["kafka_partition"]) == key]
        for kind in ["object"] + sorted({r["kind"] for r in mine} - {"object"}):  # gaps drawn over objects
            spans = merged([(r["start_offset"], r["end_offset"]) for r in mine if r["kind"] == kind])
            if not spans:
                continue
            offsets[kind] = offsets.get(kind, 0) + sum(w for _, w in spans)
            ax.broken_barh(spans, (y - 0.3, 0.6), facecolors=KIND_COLOURS.get(kind, GAP_COLOUR))
    ax.set_yticks(range(len(keys)), [f"{t}-{p}" for t, p in keys])
    ax.invert_yaxis()
    ax.set_xlabel("offset")
    ax.set_xlim(left=min(r["start_offset"] for r in rows))
    legend = [Patch(color=KIND_COLOURS.get(k, GAP_COLOUR), label=f"{k}: {n:,} offsets" if k != "object"
                    else f"objects: {n:,} offsets") for k, n in sorted(offsets.items(), key=lambda kv: kv[0] != "object")]
    gaps = sum(n for k, n in offsets.items() if k != "object")
    legend += [] if gaps else [Patch(color="white", label="no gap")]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=min(len(legend), 4),
              fontsize="small", frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


def hourly_chart(config: Any, *, spark: Any = None) -> Any:
    """:func:`hourly_figure` of :data:`HOURLY_SQL`."""
    return hourly_figure(query(config, HOURLY_SQL, spark=spark))


def sizes_chart(config: Any, *, spark: Any = None) -> Any:
    """:func:`sizes_figure` of :data:`SIZES_SQL`."""
    return sizes_figure(query(config, SIZES_SQL, spark=spark))


def lag_chart(config: Any, *, spark: Any = None) -> Any:
    """:func:`lag_figure` of :data:`LAG_SQL` (the broker is asked for its end offsets)."""
    return lag_figure(query(config, LAG_SQL, spark=spark))


def schema_chart(config: Any, *, spark: Any = None) -> Any:
    """:func:`schema_figure` of :data:`SCHEMA_SQL`."""
    return schema_figure(query(config, SCHEMA_SQL, spark=spark))


def coverage_chart(config: Any, *, spark: Any = None) -> Any:
    """:func:`coverage_figure` of :data:`COVERAGE_SQL`."""
    return coverage_figure(query(config, COVERAGE_SQL, spark=spark))
