"""The offset reader's consumer config (lakesink.executor.committed), and the guard against the admin API that
crashes librdkafka (#5040: ``list_consumer_group_offsets`` on a NOT_COORDINATOR answer)."""
from __future__ import annotations

import re
from pathlib import Path

from lakesink.executor.committed import consumer_conf

PACKAGE = Path(__file__).resolve().parents[2] / "lakesink"


def test_the_reader_reads_stable_offsets_and_never_commits_or_joins_statically():
    conf = consumer_conf({"bootstrap.servers": "b:9092", "linger.ms": 5, "transactional.id": "t",
                          "isolation.level": "read_uncommitted", "enable.auto.commit": True,
                          "group.instance.id": "static-1", "security.protocol": "SASL_SSL"}, "g1")
    assert conf == {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "group.id": "g1",
                    "isolation.level": "read_committed", "enable.auto.commit": False,
                    "enable.auto.offset.store": False, "enable.partition.eof": False}


def test_no_module_calls_the_admin_offset_listing_that_crashes_librdkafka():
    calls = [f"{p.relative_to(PACKAGE.parent)}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\.list_consumer_group_offsets\(", line)]
    assert calls == []
