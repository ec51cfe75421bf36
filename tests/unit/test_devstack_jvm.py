"""The dev services' extra JVM options (``$LAKESINK_DEV_JVM_OPTIONS``, set by the test suite's conftest)."""
from __future__ import annotations

from lakesink.devstack.service import JVM_OPTIONS_ENV, jvm_options


def test_the_options_are_split_on_spaces_and_none_when_unset(monkeypatch):
    monkeypatch.setenv(JVM_OPTIONS_ENV, " -XX:TieredStopAtLevel=1  -XX:+UseSerialGC ")
    assert jvm_options() == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    monkeypatch.delenv(JVM_OPTIONS_ENV)
    assert jvm_options() == []
