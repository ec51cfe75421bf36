"""docs/faults.md, row by row: every row of the fault table is run here and must give what the row says.

For each row ``F<nn>`` this module has a scenario (``@scenario("F<nn>")``) that builds the input on the local
stack (real broker, moto S3, the session's Spark) and runs the CLI in this process (``lakesink.cli.main.main``,
stderr captured), or points at the test elsewhere in the suite that covers the row (``covered_by``). The test
checks, against the row as written in the doc:

* the exit code;
* exactly one ``lakesink: error:`` line on stderr, containing the row's expected excerpt(s);
* the ``committed`` column: ``no side effect`` -- not even a manifest table (config and argument errors are found
  before anything is created), ``nothing`` -- no manifest row of the job, ``all`` -- every offset archived (rows
  that are not failures, e.g. a huge record).

The time each row took to fail is printed (``-s``) as a ready-to-paste ``time to fail`` cell; the doc's column
holds those measured values. It is not asserted: rows that must fail fast are bounded by the test timeout.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from support.archive_checks import produce
from support.s3_proxy import FaultProxy

from lakesink.cli.main import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "faults.md"
ROW = re.compile(r"^\|\s*(F\d{2,3})\s*\|")


@dataclass(frozen=True)
class FaultRow:
    id: str
    fault: str
    expected: tuple[str, ...]    # the backticked excerpts of the error line ("" row: no error)
    exit_code: int | None
    committed: str                # "no" (side effect) | "nothing" | "all"


def doc_rows() -> dict[str, FaultRow]:
    rows: dict[str, FaultRow] = {}
    for line in DOC.read_text().splitlines():
        if not ROW.match(line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 7, f"docs/faults.md row needs 7 cells: {line}"
        rid, fault, _input, expected, code, committed, _time = cells
        excerpts = tuple(re.findall(r"`([^`]+)`", expected))
        exit_code = int(code) if re.fullmatch(r"-?\d+", code) else None  # "—": a row another test covers
        rows[rid] = FaultRow(rid, fault, excerpts, exit_code, committed.split()[0].rstrip(","))
    return rows


@dataclass
class Outcome:
    exit_code: int
    errors: list[str]              # stderr lines that start with "lakesink: error" / "lakesink: internal error"
    seconds: float
    committed: int | None          # the job's manifest rows after the run (None: no manifest table)
    offsets: int = 0               # offsets the job's rows cover


@dataclass
class Env:
    """What a scenario builds its input with."""

    kafka: object
    s3: object
    spark: object
    tmp: Path
    capfd: object
    bucket: str
    request: object = None
    cleanups: list = field(default_factory=list)

    def topic(self, values: list[bytes | None], partitions: int = 1, **produce_kw) -> str:
        name = f"ft-{uuid.uuid4().hex[:10]}"
        self.kafka.create_topic(name, partitions=partitions)
        if values:
            produce(self.kafka, name, values, **produce_kw)
        return name

    def config(self, topic: str = "unused", **over: str) -> dict:
        cfg = {"name": f"job-{topic}", "topics": topic, "flush.size": "10", "format.class": "json",
               "s3.bucket.name": self.bucket, "s3.region": "us-east-1", "store.url": self.s3.endpoint_url,
               "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
               "manifest.location": str(self.tmp / "manifest"),
               "kafka.bootstrap.servers": self.kafka.bootstrap_servers}
        cfg.update(over)
        return {k: v for k, v in cfg.items() if v is not None}

    def write(self, cfg: dict | bytes | str, name: str = "job.json") -> str:
        path = self.tmp / name
        if isinstance(cfg, dict):
            path.write_text(json.dumps(cfg))
        elif isinstance(cfg, bytes):
            path.write_bytes(cfg)
        else:
            path.write_text(cfg)
        return str(path)

    def cli(self, *args: str, cfg: dict | None = None) -> Outcome:
        self.capfd.readouterr()
        t0 = time.monotonic()
        code = main(list(args))
        took = time.monotonic() - t0
        err = self.capfd.readouterr().err
        errors = [ln for ln in err.splitlines() if ln.startswith(("lakesink: error", "lakesink: internal error"))]
        committed, offsets = self.manifest(cfg) if cfg is not None else (None, 0)
        return Outcome(code, errors, took, committed, offsets)

    def sink(self, cfg: dict, *extra: str) -> Outcome:
        return self.cli("sink", "--config", self.write(cfg), "--once", "--flush-tail", *extra, cfg=cfg)

    def registry(self) -> str:
        """The Schema Registry's URL (started on first use: most rows do not need it)."""
        return self.request.getfixturevalue("schema_registry_url")

    def manifest(self, cfg: dict) -> tuple[int | None, int]:
        """(rows of the job, offsets they cover) in the manifest; (None, 0) when there is no table."""
        from deltalake import DeltaTable

        loc = cfg.get("manifest.location", "")
        if not Path(loc, "_delta_log").exists():
            return None, 0
        t = DeltaTable(loc).to_pyarrow_table(columns=["job", "range_start", "range_end"]).to_pylist()
        mine = [r for r in t if r["job"] == cfg["name"]]
        return len(mine), sum(r["range_end"] - r["range_start"] + 1 for r in mine)


SCENARIOS: dict[str, Callable[[Env], Outcome]] = {}
COVERED_ELSEWHERE: dict[str, str] = {}


def scenario(rid: str):
    def register(fn: Callable[[Env], Outcome]):
        SCENARIOS[rid] = fn
        return fn
    return register


def covered_by(rid: str, node: str) -> None:
    """Row ``rid`` is the test ``node`` (``path::test_name``) elsewhere in the suite."""
    COVERED_ELSEWHERE[rid] = node


def config_row(rid: str, **over: str | None) -> None:
    """A config error: ``lakesink sink`` with the base config changed by ``over`` (None: key removed)."""
    @scenario(rid)
    def run(env: Env) -> Outcome:
        cfg = env.config(**over)
        return env.sink(cfg)


# ------------------------------------------------------------------------------------- config (exit 3)
config_row("F01", **{"flush.sise": "3"})
config_row("F02", **{"flush.size": "abc"})
config_row("F03", **{"flush.size": "0"})
config_row("F04", **{"format.class": "com.example.OrcFormat"})
config_row("F05", **{"s3.bucket.name": None})
config_row("F06", **{"s3.bucket.name": "My_Bucket"})
config_row("F07", **{"partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner"})
config_row("F08", **{"partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
                     "path.format": "YYYY/MM", "partition.duration.ms": "3600000", "locale": "en",
                     "timezone": "Mars/Olympus"})
config_row("F09", **{"topics.dir": "../../etc"})
config_row("F10", **{"topics.dir": "/absolute"})
config_row("F11", **{"schema.compatibility": "SOMETIMES"})
config_row("F12", **{"aws.s3.bucket.name": "archive"})
config_row("F13", **{"topics.regex": "orders.*"})
config_row("F14", **{"value.schema": "/no/such/schema.avsc"})
config_row("F15", **{"kafka.ssl.truststore.location": "/etc/kafka/truststore.jks"})
config_row("F16", **{"s3.ssea.name": "AES512"})


@scenario("F17")
def binary_config(env: Env) -> Outcome:
    return env.cli("sink", "--config", env.write(b"\x00\x01\xff\xfe" * 64, "job.properties"), "--once")


@scenario("F18")
def missing_config(env: Env) -> Outcome:
    return env.cli("sink", "--config", str(env.tmp / "nowhere.properties"), "--once")


@scenario("F19")
def yaml_syntax(env: Env) -> Outcome:
    return env.cli("sink", "--config", env.write("name: job\ntopics: [orders\n", "job.yaml"), "--once")


# ------------------------------------------------------------------------------------- usage (exit 2)
@scenario("F20")
def bad_interval(env: Env) -> Outcome:
    cfg = env.config()
    return env.cli("sink", "--config", env.write(cfg), "--continuous", "--interval", "banana", cfg=cfg)


@scenario("F21")
def bad_sql(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 1}'])
    cfg = env.config(topic)
    assert env.sink(cfg).exit_code == 0
    out = env.cli("sql", "--config", env.write(cfg), "SELECT nosuchcolumn FROM objects")
    out.committed, out.offsets = 0, 0  # the query commits nothing; the archive above is the setup
    return out


@scenario("F22")
def bad_restore_where(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 1}'])
    cfg = env.config(topic)
    assert env.sink(cfg).exit_code == 0
    out = env.cli("restore", "--config", env.write(cfg), "--where", "topic = = 'x'", "--to-topic", f"{topic}-copy")
    out.committed, out.offsets = 0, 0
    return out


# ------------------------------------------------------------------------------------- bad records (exit 6)
@scenario("F23")
def corrupt_json(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 0}', b'{"id": 1}', b'{"id": 2}', b'{"id": 3', b'{"id": 4}'])
    return env.sink(env.config(topic))


@scenario("F24")
def missing_partition_field(env: Env) -> Outcome:
    topic = env.topic([b'{"country": "de"}', b'{"city": "Paris"}'])
    return env.sink(env.config(topic, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "country"}))


@scenario("F25")
def missing_timestamp_field(env: Env) -> Outcome:
    topic = env.topic([b'{"ts": 1700000000000}', b'{"id": 1}'])
    return env.sink(env.config(topic, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'dt'=YYYY-MM-dd", "partition.duration.ms": "86400000", "locale": "en",
        "timezone": "UTC", "timestamp.extractor": "RecordField", "timestamp.field": "ts"}))


@scenario("F26")
def tombstone_under_fail(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 0}', None], keys=[b"k0", b"k1"])
    return env.sink(env.config(topic, **{"behavior.on.null.values": "fail"}))


@scenario("F27")
def non_json_under_json_format(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 0}', b"\x00\x01binary"])
    return env.sink(env.config(topic))


AVRO_SCHEMA = json.dumps({"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]})


@scenario("F37")
def corrupt_bare_avro(env: Env) -> Outcome:
    import io

    import fastavro

    good = io.BytesIO()
    fastavro.schemaless_writer(good, fastavro.parse_schema(json.loads(AVRO_SCHEMA)), {"sensor": "a", "value": 1.0})
    topic = env.topic([good.getvalue(), b"\xff\xff\xff\xff\x07garbage", good.getvalue()])
    return env.sink(env.config(topic, **{"format.class": "avro", "value.schema": AVRO_SCHEMA}))


@scenario("F48")
def corrupt_bare_avro_spark_reader(env: Env) -> Outcome:
    import io

    import fastavro

    good = io.BytesIO()
    fastavro.schemaless_writer(good, fastavro.parse_schema(json.loads(AVRO_SCHEMA)), {"sensor": "a", "value": 1.0})
    topic = env.topic([good.getvalue(), b"\xff\xff\xff\xff\x07garbage", b"\x02", good.getvalue()])
    return env.sink(env.config(topic, **{"format.class": "avro", "value.schema": AVRO_SCHEMA,
                                         "kafka.reader": "spark"}))


@scenario("F38")
def unknown_schema_id(env: Env) -> Outcome:
    registry = env.registry()
    topic = env.topic([b"\x00" + (987654).to_bytes(4, "big") + b"\x02a"])
    return env.sink(env.config(topic, **{"format.class": "avro", "schema.registry.url": registry}))


covered_by("F39", "tests/integration/test_protobuf_topics.py::test_a_corrupt_protobuf_record_fails_the_batch_naming_it")
covered_by("F40", "tests/integration/test_sink_transforms.py::test_a_failing_transform_names_the_record_and_commits_nothing")
covered_by("F41", "tests/integration/test_sink_concurrency.py::test_three_runs_started_together_commit_each_batch_once")
covered_by("F42", "tests/integration/test_sink_concurrency.py::"
                  "test_zombie_executor_writing_after_its_batch_was_fenced_replaces_nothing")
covered_by("F43", "tests/integration/test_kafka_faults.py::test_broker_halted_mid_read_and_restarted")
covered_by("F44", "tests/integration/test_kafka_faults.py::"
                  "test_topic_deleted_and_recreated_is_refused_naming_the_topic_id_change")
covered_by("F45", "tests/integration/test_sink_crash.py::test_sigkill_then_rerun_is_exactly_once")
covered_by("F46", "tests/integration/test_sink_cli.py::test_continuous_mode_finishes_the_batch_and_exits_0_on_sigterm")
covered_by("F47", "tests/integration/test_secrets.py::test_planted_secret_is_in_no_argv_event_log_or_output")
covered_by("F49", "tests/integration/test_sink_deadletter.py::"
                  "test_bad_records_go_to_the_dead_letter_topic_once_and_the_rest_is_archived")
covered_by("F50", "tests/integration/test_sink_deadletter.py::"
                  "test_a_missing_dead_letter_topic_fails_at_preflight_in_one_line")
covered_by("F51", "tests/unit/test_config_overrides.py::test_cli_check_refuses_a_java_trust_store_override_with_exit_3")
covered_by("F52", "tests/unit/test_locations.py::test_the_metrics_table_of_a_relative_path_manifest_is_a_path_table")
covered_by("F53", "tests/unit/test_locations.py::test_lakesink_dir_and_topic_manifest_is_refused")
covered_by("F54", "tests/integration/test_sql_jobs.py::test_cli_restore_with_the_union_where_exits_2_before_anything")
covered_by("F55", "tests/integration/test_sql_jobs.py::test_the_issue_count_is_job_a_alone_unless_all_jobs")
covered_by("F56", "tests/integration/test_restore_spelling.py::test_a_respelled_restore_produces_nothing_more")
covered_by("F57", "tests/integration/test_restore_spelling.py::test_a_where_that_chose_part_of_interleaved_objects_refuses_a_later_overlap")
covered_by("F58", "tests/integration/test_restore_worker.py::test_a_second_producer_with_the_same_transactional_id_fences_the_first")
covered_by("F59", "tests/integration/test_sink_vacuum_race.py::test_uploads_deleted_before_the_commit_exit_5_and_a_replacement_stays_exit_4")
covered_by("F60", "tests/integration/test_sink_vacuum_race.py::test_uploads_deleted_before_the_commit_exit_5_and_a_replacement_stays_exit_4")
covered_by("F61", "tests/integration/test_sink_cli.py::test_continuous_mode_finishes_the_batch_and_exits_0_on_sigterm")
covered_by("F62", "tests/integration/test_cmd_outcomes.py::test_sink_without_any_s3_credentials_says_so_with_exit_3")
covered_by("F63", "tests/unit/test_cmd_words.py::test_missing_credentials_are_one_line_exit_3_naming_where_lakesink_looked")
covered_by("F64", "tests/unit/test_cmd_words.py::test_half_a_key_pair_or_an_unknown_profile_is_said_without_showing_a_secret")
covered_by("F65", "tests/unit/test_cmd_words.py::test_a_store_call_without_credentials_fails_at_once_with_the_same_words")
covered_by("F66", "tests/unit/test_cmd_words.py::test_an_s3_endpoint_that_never_answers_fails_vacuum_and_status_in_one_line_exit_5")
covered_by("F67", "tests/integration/test_cmd_outcomes.py::test_status_of_a_job_that_never_ran_is_never_run_and_max_lag_judges_it")
covered_by("F68", "tests/integration/test_cmd_outcomes.py::test_schema_check_of_a_json_archive_has_nothing_to_compare_and_fails_unless_allowed")
covered_by("F69", "tests/unit/test_config_providers.py::"
                  "test_a_missing_file_key_or_variable_names_the_key_and_the_reference")
covered_by("F70", "tests/unit/test_config_providers.py::"
                  "test_cli_error_is_one_line_with_exit_3_and_no_value")
covered_by("F71", "tests/unit/test_config_providers.py::"
                  "test_allowed_paths_confine_the_file_and_directory_providers")
covered_by("F72", "tests/unit/test_config_providers.py::"
                  "test_an_unknown_provider_without_a_declaration")
covered_by("F73", "tests/unit/test_config_providers.py::"
                  "test_a_provider_class_lakesink_does_not_implement_is_an_error")
covered_by("F74", "tests/unit/test_config_providers.py::"
                  "test_a_provided_value_is_masked_in_validation_errors")
covered_by("F75", "tests/integration/test_secured_kafka.py::"
                  "test_a_kafka_failure_is_one_line_exit_5_at_the_first_answer")
covered_by("F76", "tests/integration/test_secured_kafka.py::"
                  "test_a_kafka_failure_is_one_line_exit_5_at_the_first_answer")
covered_by("F77", "tests/integration/test_secured_kafka.py::"
                  "test_a_kafka_failure_is_one_line_exit_5_at_the_first_answer")
covered_by("F78", "tests/unit/test_preflight_local.py::"
                  "test_closed_broker_port_fails_at_the_first_refusal_naming_it")
covered_by("F79", "tests/integration/test_secured_kafka.py::"
                  "test_a_jks_truststore_with_a_wrong_password_is_one_line")
covered_by("F80", "tests/integration/test_wheel.py::"
                  "test_wheel_setup_then_sink_sql_and_restore_dry_run")
covered_by("F81", "tests/integration/test_wheel.py::"
                  "test_wheel_setup_then_sink_sql_and_restore_dry_run")
covered_by("F82", "tests/unit/test_setup.py::"
                  "test_an_unreachable_repository_is_one_line_naming_the_url")
covered_by("F83", "tests/unit/test_setup.py::"
                  "test_the_local_stack_without_moto_names_the_extra")
covered_by("F84", "tests/integration/test_wheel.py::"
                  "test_wheel_dev_up_and_down_after_setup")
covered_by("F85", "tests/integration/test_wheel.py::"
                  "test_wheel_dev_up_and_down_after_setup")
covered_by("F86", "tests/unit/test_setup.py::"
                  "test_no_java_is_one_line_naming_what_to_install")
covered_by("F87", "tests/integration/test_restore_compacted.py::"
                  "test_cli_latest_per_key_dry_run_run_and_usage_errors")
covered_by("F88", "tests/integration/test_restore_compacted.py::"
                  "test_an_archive_without_keys_is_refused_naming_why")
covered_by("F89", "tests/unit/test_restore_latest.py::"
                  "test_a_keyless_record_is_refused_naming_it")
covered_by("F90", "tests/integration/test_sql_views.py::"
                  "test_cli_sql_in_process_text_json_and_bad_sql")
covered_by("F91", "tests/integration/test_restore_registry.py::"
                  "test_cli_restore_with_a_target_registry_config_refuses_an_incompatible_subject_then_restores")
covered_by("F92", "tests/integration/test_restore_registry.py::"
                  "test_cli_restore_with_a_target_registry_config_refuses_an_incompatible_subject_then_restores")
covered_by("F93", "tests/integration/test_restore_registry.py::"
                  "test_an_unreachable_target_is_a_registry_error_without_the_credentials")
covered_by("F94", "tests/integration/test_restore_registry.py::"
                  "test_raw_wire_protobuf_bytes_rewritten_and_a_record_whose_id_was_not_copied_is_never_produced")
covered_by("F95", "tests/unit/test_registry_copy.py::"
                  "test_a_target_registry_for_an_archive_without_wire_format_bytes_is_refused_before_any_registry_call")

covered_by("F96", "tests/integration/test_restore_partitions.py::"
                   "test_bad_flags_are_refused_before_anything")
covered_by("F97", "tests/integration/test_restore_partitions.py::"
                   "test_bad_flags_are_refused_before_anything")
covered_by("F98", "tests/integration/test_restore_partitions.py::"
                   "test_bad_flags_are_refused_before_anything")
covered_by("F99", "tests/integration/test_restore_partitions.py::"
                   "test_4_to_2_by_key_then_another_routing_is_another_restores")
covered_by("F100", "tests/integration/test_expire.py::"
                   "test_a_bad_age_is_one_line_with_exit_2")
covered_by("F102", "tests/unit/test_progress_display.py::"
                   "test_a_bad_progress_interval_is_one_line_and_exit_2_before_anything_starts")
covered_by("F101", "tests/integration/test_expire.py::"
                   "test_sigkill_at_every_point_of_an_expire_then_a_rerun_finishes_it")
covered_by("F103", "tests/integration/test_restore_groups.py::"
                   "test_refused_while_the_destination_group_has_members")
covered_by("F104", "tests/integration/test_restore_groups.py::"
                   "test_dry_run_plan_and_cli")
covered_by("F105", "tests/integration/test_restore_groups.py::"
                   "test_sigkill_then_rerun_places_the_group_once")
covered_by("F106", "tests/unit/test_consumer_groups_config.py::"
                   "test_bad_values_name_the_key")

covered_by("F107", "tests/unit/test_notebook_helpers.py::"
                   "test_a_chart_without_matplotlib_names_the_extra")
covered_by("F108", "tests/unit/test_notebook_helpers.py::"
                   "test_a_widget_value_of_the_wrong_type_is_one_clear_error")
covered_by("F109", "tests/integration/test_restore_groups.py::"
                   "test_routed_restores_place_groups_on_every_partition_a_source_partition_reaches")
covered_by("F110", "tests/unit/test_restore_throttle.py::"
                   "test_restore_refuses_a_max_rate_that_is_not_a_positive_number_before_reading_anything")

covered_by("F111", "tests/integration/test_migration.py::"
                   "test_import_refuses_what_cannot_be_adopted_in_one_line")
covered_by("F112", "tests/unit/test_translate_migration.py::"
                   "test_parse_start_offsets")

covered_by("F113", "tests/integration/test_erase.py::"
                   "test_a_bad_predicate_is_one_line_with_exit_2")
covered_by("F114", "tests/integration/test_erase.py::"
                   "test_a_bad_predicate_is_one_line_with_exit_2")
covered_by("F115", "tests/integration/test_erase.py::"
                   "test_a_bad_predicate_is_one_line_with_exit_2")
covered_by("F116", "tests/integration/test_erase.py::"
                   "test_sigkill_at_every_point_of_an_erase_then_a_rerun_finishes_it")
covered_by("F117", "tests/integration/test_erase.py::"
                   "test_a_sink_committing_between_plan_and_commit_is_not_damaged")
covered_by("F118", "tests/integration/test_erase.py::"
                   "test_verify_names_an_erased_offset_an_object_still_holds")
covered_by("F119", "tests/unit/test_archive_partitions.py::"
                   "test_an_erase_matching_tombstones_is_refused_in_one_line")

covered_by("F120", "tests/integration/test_committed_offsets.py::"
                   "test_a_broker_that_has_just_started_never_crashes_the_reader")
covered_by("F121", "tests/integration/test_committed_offsets.py::"
                   "test_offsets_come_back_stable_with_their_metadata_and_the_reader_never_joins")

covered_by("F122", "tests/unit/test_erase_plan.py::"
                   "test_a_bad_predicate_fails_as_before_even_when_the_manifest_prunes_nothing_or_everything")
covered_by("F123", "tests/integration/test_erase.py::"
                   "test_the_plan_runs_as_tasks_of_spark_and_of_local_workers")

covered_by("F124", "tests/integration/test_migration.py::"
                   "test_import_refuses_what_cannot_be_adopted_in_one_line")

covered_by("F125", "tests/unit/test_restore_latest.py::"
                   "test_adopted_objects_are_refused_as_adopted_not_as_archived_without_keys")

# ------------------------------------------------------------------------------------- not failures
@scenario("F28")
def huge_record(env: Env) -> Outcome:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"ft-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": env.kafka.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1, config={"max.message.bytes": str(12 * 1024 * 1024)})])[name].result(30)
    p = Producer({"bootstrap.servers": env.kafka.bootstrap_servers, "message.max.bytes": 12 * 1024 * 1024})
    big = b"x" * (8 * 1024 * 1024)
    for v in (b"small", big, b"small again"):
        p.produce(name, v)
    assert p.flush(30) == 0
    out = env.sink(env.config(name, **{"format.class": "bytearray", "flush.size": "2",
                                       "kafka.fetch.max.bytes": str(64 * 1024 * 1024),
                                       "kafka.max.partition.fetch.bytes": str(16 * 1024 * 1024)}))
    assert out.offsets == 3
    return out


@scenario("F29")
def field_value_with_dot_dot(env: Env) -> Outcome:
    topic = env.topic([b'{"country": "../../etc"}'])
    out = env.sink(env.config(topic, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "country"}))
    keys = [o["Key"] for o in env.s3.client().list_objects_v2(Bucket=env.bucket).get("Contents", [])]
    assert f"topics/{topic}/country=..%2F..%2Fetc/{topic}+0+0000000000.json" in keys, keys
    return out


# ------------------------------------------------------------------------------------- services (exit 5)
def dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@scenario("F30")
def broker_unreachable(env: Env) -> Outcome:
    return env.sink(env.config("orders", **{"kafka.bootstrap.servers": f"127.0.0.1:{dead_port()}"}))


@scenario("F31")
def store_unreachable(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 0}'])
    return env.sink(env.config(topic, **{"store.url": f"http://127.0.0.1:{dead_port()}", "s3.part.retries": "1",
                                         "s3.retry.backoff.ms": "50"}))


@scenario("F32")
def bucket_missing(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 0}'])
    return env.sink(env.config(topic, **{"s3.bucket.name": f"missing-{uuid.uuid4().hex[:8]}"}))


@scenario("F33")
def manifest_unreachable(env: Env) -> Outcome:
    topic = env.topic([b'{"id": 0}'])
    cfg = env.config(topic, **{"manifest.location": f"s3a://{env.bucket}/_lakesink/manifest",
                               "store.url": f"http://127.0.0.1:{dead_port()}", "s3.part.retries": "1",
                               "s3.retry.backoff.ms": "50"})
    return env.sink(cfg)


@scenario("F34")
def access_denied(env: Env) -> Outcome:
    proxy = FaultProxy(env.s3.endpoint_url).start()
    env.cleanups.append(proxy.stop)
    topic = env.topic([b'{"id": 0}'])
    cfg = env.config(topic, **{"store.url": proxy.url})
    proxy.deny = 1.0
    return env.sink(cfg)


@scenario("F35")
def throttled_past_the_deadline(env: Env) -> Outcome:
    proxy = FaultProxy(env.s3.endpoint_url).start()
    env.cleanups.append(proxy.stop)
    topic = env.topic([b'{"id": 0}'])
    cfg = env.config(topic, **{"store.url": proxy.url, "s3.retry.deadline.ms": "2000", "s3.retry.backoff.ms": "50"})
    proxy.slowdown = 1.0
    return env.sink(cfg)


@scenario("F36")
def registry_unreachable(env: Env) -> Outcome:
    topic = env.topic([b"\x00\x00\x00\x00\x07" + b"\x02"])
    return env.sink(env.config(topic, **{"format.class": "avro",
                                         "schema.registry.url": f"http://127.0.0.1:{dead_port()}",
                                         "schema.registry.max.retries": "1",
                                         "schema.registry.retries.wait.ms": "50"}))


# ------------------------------------------------------------------------------------- the test
ROWS = doc_rows()


def test_every_row_has_a_test_and_every_test_a_row():
    assert len(ROWS) >= 30
    assert set(ROWS) == set(SCENARIOS) | set(COVERED_ELSEWHERE)
    root = DOC.parents[1]
    for rid, node in COVERED_ELSEWHERE.items():
        path, name = node.split("::")
        assert f"def {name}(" in (root / path).read_text(), f"{rid}: {node} does not exist"
        assert f"{Path(path).name}::{name}" in DOC.read_text(), f"{rid}: the doc row should name {node}"


@pytest.fixture
def env(kafka, s3, spark, bucket, tmp_path, capfd, request):
    e = Env(kafka, s3, spark, tmp_path, capfd, bucket, request)
    try:
        yield e
    finally:
        for stop in e.cleanups:
            stop()


@pytest.mark.parametrize("rid", sorted(SCENARIOS))
def test_fault_row(rid, env):
    row = ROWS[rid]
    assert row.exit_code is not None, f"{rid}: the doc's exit column must be a number"
    out = SCENARIOS[rid](env)
    print(f"\n{rid} | exit {out.exit_code} | {out.seconds:.1f} s | {out.errors}")
    assert out.exit_code == row.exit_code, (rid, out)
    if row.exit_code == 0:
        assert out.errors == [], (rid, out)
    else:
        assert len(out.errors) == 1, (rid, out.errors)
        for excerpt in row.expected:
            assert excerpt in out.errors[0], (rid, excerpt, out.errors[0])
    if row.committed == "no":
        assert out.committed is None, (rid, "a manifest table was created", out)
    elif row.committed == "nothing":
        assert not out.committed, (rid, out)
    else:
        assert row.committed == "all" and out.committed and out.offsets > 0, (rid, out)
