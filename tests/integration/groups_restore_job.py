"""``python groups_restore_job.py SPEC FAULT``: one restore worker placing consumer groups
(lakesink.executor.restore.restore_partition with ``groups``) in its own process, SIGKILLed by itself at FAULT as in
restore_job.py: ``none``; ``mid:N`` (in the N-th transaction, two of its records on the broker, uncommitted);
``between:N`` (right after the N-th commit). SPEC: restore_job.py's, plus ``groups``: [[group, topic, partition,
offset]]. Prints one JSON line with the result when it finishes."""
import dataclasses
import json
import os
import signal
import sys

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.executor.groups import GroupOffset, GroupTargets
from lakesink.executor.readback import ArchivedObject
from lakesink.executor.restore import restore_partition
from lakesink.store import open_store


def main(spec_path: str, fault: str) -> None:
    spec = json.loads(open(spec_path).read())
    cfg = SinkConfig.from_dict(spec["config"])
    objects = [ArchivedObject.from_row(r) for r in spec["rows"]]
    targets: dict = {}
    for g, t, p, off in spec["groups"]:
        targets.setdefault((t, p), []).append(GroupOffset(g, t, p, off))
    kind, _, n = fault.partition(":")
    state = {"commits": 0, "txn": 0}

    def on_event(point: str, info: dict) -> None:
        if point == "begin":
            state["txn"] += 1
        if point == "committed":
            state["commits"] += 1
            if kind == "between" and state["commits"] == int(n):
                os.kill(os.getpid(), signal.SIGKILL)
        if point == "produced" and kind == "mid" and state["txn"] == int(n) and info["in_txn"] == 2:
            info["producer"].flush(30)  # the two records are in the log, in an open transaction
            os.kill(os.getpid(), signal.SIGKILL)

    result = restore_partition(
        spec["name"], spec["topic"], spec["partition"], objects, open_store(wiring.store_settings(cfg)),
        wiring.value_format(cfg), spec["producer"], keys_format=wiring.keys_format(cfg),
        headers_format=wiring.headers_format(cfg), records_per_txn=spec["records_per_txn"], on_event=on_event,
        groups=GroupTargets({k: tuple(v) for k, v in targets.items()}))
    print(json.dumps({k: v for k, v in dataclasses.asdict(result).items() if k != "events"}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
