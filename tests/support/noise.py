"""What must not reach a user's terminal from a quiet lakesink run (issue #28 item 6): the lines Spark's JVM, log4j,
SLF4J, Spark's console progress bar, Python worker tracebacks and librdkafka print. :func:`noise_lines` picks them
out of a captured stdout/stderr; lakesink's own lines (``lakesink: error: ...``, results, a notebook's prints) are
not noise."""
from __future__ import annotations

import re

__all__ = ["NOISE", "noise_lines", "spark_lines"]

#: (what, pattern) -- each matched against one line of output
NOISE: tuple[tuple[str, re.Pattern], ...] = tuple((what, re.compile(rx)) for what, rx in (
    # the JVM itself, before any configuration is read
    ("jvm", r"^WARNING: (Using incubator modules|An illegal reflective|A terminally deprecated|sun\.misc)"),
    ("jvm", r"^(Picked up (_JAVA_OPTIONS|JAVA_TOOL_OPTIONS)|OpenJDK .*VM warning)"),
    # Spark's banner when it falls back to its own log4j profile
    ("spark", r"^Using Spark's default log4j profile"),
    ("spark", r"^Setting default log level to "),
    ("spark", r"^To adjust logging level use sc\.setLogLevel"),
    # log4j lines: Spark's default layout (yy/MM/dd HH:mm:ss LEVEL), ISO dates, and log4j2's own status logger
    ("log4j", r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "),
    ("log4j", r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[.,]\d+ (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "),
    ("log4j", r"^(log4j:|ERROR StatusLogger|WARN StatusLogger|StatusLogger )"),
    ("slf4j", r"^SLF4J(\(\w\))?: "),
    # Spark's console progress bar
    ("stage-bar", r"\[Stage \d+:"),
    # a Python traceback (a worker's, or any other), and Spark's wrapping of one
    ("traceback", r"^\s*Traceback \(most recent call last\)"),
    ("traceback", r"(org\.apache\.spark\.api\.python\.PythonException|py4j\.protocol\.Py4JJavaError)"),
    ("py4j", r"^(ERROR|WARNING|INFO):py4j"),
    # librdkafka's own log lines (%level|timestamp|facility|client|...)
    ("librdkafka", r"^%\d\|\d+\.\d+\|"),
))


def noise_lines(output: str | bytes) -> list[tuple[str, str]]:
    """The lines of ``output`` that are noise, each as (what, line); [] for a quiet run."""
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    found = []
    for line in output.replace("\r", "\n").splitlines():
        for what, rx in NOISE:
            if rx.search(line):
                found.append((what, line))
                break
    return found


def spark_lines(output: str | bytes) -> list[str]:
    """The noise lines a Spark JVM printed (JVM, banner, log4j, SLF4J, progress bar): what ``--verbose`` brings
    back."""
    return [line for what, line in noise_lines(output) if what in ("jvm", "spark", "log4j", "slf4j", "stage-bar")]
