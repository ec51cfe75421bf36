"""Running ``tests/integration/restore_job.py`` -- one restore worker in a process of its own that a test can
SIGKILL at a fault point -- from a spec written for it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lakesink.manifest.rows import TOMBSTONES_NOTE

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
ROOT = INTEGRATION.parents[1]


def object_spec_rows(objs) -> list[dict]:
    """:class:`lakesink.executor.readback.ArchivedObject` values as the spec's manifest rows."""
    return [{"topic": o.topic, "kafka_partition": o.kafka_partition, "object_key": o.object_key, "etag": o.etag,
             "version_id": o.version_id, "first_offset": o.first_offset, "last_offset": o.last_offset,
             "record_count": o.record_count, "side_files": [dict(s) for s in o.side_files], "format": o.format,
             "compression": o.compression, "size_bytes": o.size_bytes, "schema_id": o.schema_id,
             "min_timestamp": o.min_timestamp_ms, "max_timestamp": o.max_timestamp_ms,
             "note": TOMBSTONES_NOTE if o.value_omitted else None} for o in objs]


def run_restore_job(kafka, tmp_path: Path, cfg, rows: list[dict], name: str, topic: str, fault: str, *,
                    partition: int = 0, records_per_txn: int, **extra) -> subprocess.CompletedProcess:
    """Restore ``rows`` of ``cfg``'s archive into ``topic``-``partition`` (-1: routed by ``extra["router"]``) in a
    child process killed with SIGKILL at ``fault`` (``mid:N``, ``between:N``; ``none``: run to the end)."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"config": cfg.as_dict(redact=False), "rows": rows, "name": name, "topic": topic,
                                "partition": partition, "records_per_txn": records_per_txn,
                                "producer": {"bootstrap.servers": kafka.bootstrap_servers}, **extra}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(INTEGRATION)])}
    return subprocess.run([sys.executable, str(INTEGRATION / "restore_job.py"), str(spec), fault], env=env,
                          capture_output=True, text=True, timeout=300)
