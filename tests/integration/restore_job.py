"""``python restore_job.py SPEC FAULT``: one restore worker (lakesink.executor.restore.restore_partition) in its own
process, SIGKILLed by itself at FAULT: ``none``; ``mid:N`` (in the N-th transaction, once two of its records are
on the broker, uncommitted); ``between:N`` (right after the N-th commit). SPEC is a JSON file: the sink config
the objects were archived with, their manifest rows (ManifestRow.to_json), the restore name, destination and
producer settings, optional restore_partition keyword ``options``, an optional ``router`` ([destination
partition count, partitioner, partition map]: a routed worker) and optional ``groups`` ([[group, topic, partition,
offset]]: consumer groups the worker places). Prints one JSON line with the result when it finishes."""
import dataclasses
import json
import os
import signal
import sys

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.executor.readback import ArchivedObject
from lakesink.executor.restore import restore_partition
from lakesink.store import open_store


def main(spec_path: str, fault: str) -> None:
    spec = json.loads(open(spec_path).read())
    cfg = SinkConfig.from_dict(spec["config"])
    objects = [ArchivedObject.from_row(r) for r in spec["rows"]]
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

    options = dict(spec.get("options", {}))
    if "router" in spec:  # [destination partition count, partitioner, partition map]: a routed restore's worker
        from lakesink.executor.partitioning import Router

        options["routers"] = {spec["topic"]: Router.from_options(*spec["router"])}
    if "groups" in spec:  # [[group, topic, partition, source offset]]: consumer groups the worker places
        from lakesink.executor.groups import GroupOffset, GroupTargets

        targets: dict = {}
        for g, t, p, off in spec["groups"]:
            targets.setdefault((t, p), []).append(GroupOffset(g, t, p, off))
        options["groups"] = GroupTargets({k: tuple(v) for k, v in targets.items()})
    result = restore_partition(
        spec["name"], spec["topic"], spec["partition"], objects, open_store(wiring.store_settings(cfg)),
        wiring.value_format(cfg), spec["producer"], keys_format=wiring.keys_format(cfg),
        headers_format=wiring.headers_format(cfg), records_per_txn=spec["records_per_txn"], on_event=on_event,
        **options)
    print(json.dumps({k: v for k, v in dataclasses.asdict(result).items() if k != "events"}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
