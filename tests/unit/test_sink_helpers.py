"""Driver-side helpers of the sink that need no services."""
import pytest

from lakesink.errors import LakesinkError
from lakesink.driver.sink import executor_error, parse_interval

WRAPPED = """An error occurred while calling o123.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "worker.py", line 3, in f
lakesink.errors.DecodeError: record orders-2@17: not valid JSON: Expecting value
"""


def test_executor_error_prefers_lakesinks_own_line():
    assert executor_error(Exception(WRAPPED)) == "DecodeError: record orders-2@17: not valid JSON: Expecting value"


def test_executor_error_falls_back_to_the_first_line():
    assert executor_error(Exception("Connection refused\nmore")) == "Connection refused"


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("5m", 300), ("1h", 3600), ("250ms", 0.25), ("2", 2)])
def test_parse_interval(text, seconds):
    assert parse_interval(text) == seconds


def test_parse_interval_rejects_garbage_naming_the_flag():
    with pytest.raises(LakesinkError, match="--interval 'soon'"):
        parse_interval("soon")


def test_first_mixed_finds_the_first_row_of_another_topic_partition():
    from lakesink.executor.task import first_mixed

    assert first_mixed(None, [3, 3, 3], 3) is None
    assert first_mixed(["t", "t"], [3, 3], 2) is None
    assert first_mixed(None, [3, 3, 4, 3], 4) == 2
    assert first_mixed(["t", "u", "t"], [3, 3, 3], 3) == 1


def test_notebook_api_is_reexported_from_the_package_root():
    import lakesink
    from lakesink.config import load_config
    from lakesink.driver.sink import SinkJob
    from lakesink.runtime.engine import run
    from lakesink.runtime.spark import get_spark

    assert (lakesink.run, lakesink.SinkJob, lakesink.get_spark, lakesink.load_config) == (run, SinkJob, get_spark,
                                                                                          load_config)
    assert set(lakesink.__all__) >= {"run", "get_spark", "load_config", "vacuum", "Manifest", "LakesinkError"}
    with pytest.raises(AttributeError):
        lakesink.no_such_name  # noqa: B018
