"""The `lakesink` command without services: check, the output layer (text/json), errors, --help."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakesink.cli import build_parser, main
from lakesink.cli.output import (CheckResult, DevResult, JsonOutput, SinkResult, TextOutput, VacuumResult,
                                 make_output)
from lakesink.driver.sink import BatchResult
from lakesink.driver.vacuum import VacuumReport
from lakesink.errors import ArchiveReadError, ConfigError, LakesinkError
from lakesink.store import ObjectInfo

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "schemas" / "examples").iterdir())
BAD = ("name=j\ntopics=t\nflush.size=zero\nformat.class=avro\nformatt.class=json\n"
       "s3.bucket.name=b\nmanifest.location=/tmp/m\nkafka.bootstrap.servers=x:1\n")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakesink.cli", *args], capture_output=True, text=True, timeout=120)


# ------------------------------------------------------------------------------------------ check

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_check_every_example_text(path, capsys):
    from lakesink.config import load_config

    cfg = load_config(path)
    assert main(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == f"{path}: OK (job {cfg.name!r})"
    assert [ln for ln in lines if ln.startswith("  ignored: ")] == [
        f"  ignored: {k} ({why})" for k, why in sorted(cfg.ignored_keys)]
    assert [ln for ln in lines if ln.startswith("  warning: ")] == [f"  warning: {w}" for w in cfg.warnings]
    assert len(lines) == 1 + len(cfg.ignored_keys) + len(cfg.warnings) and err == ""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_check_every_example_json(path, capsys):
    from lakesink.config import load_config

    cfg = load_config(path)
    assert main(["--format", "json", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    doc = json.loads(out)
    assert doc["ok"] is True and doc["path"] == str(path) and doc["name"] == cfg.name
    assert doc["format"] == cfg.format_name and doc["flush_size"] == cfg.flush_size
    assert doc["manifest_location"] == cfg.manifest_location and doc["topics"] == list(cfg.topics)
    assert doc["ignored_keys"] == [{"key": k, "reason": why} for k, why in sorted(cfg.ignored_keys)]
    assert doc["warnings"] == list(cfg.warnings)


def test_check_example_subprocess_has_ignored_keys():
    """The reported bug: `lakesink check schemas/examples/sink.properties` died after printing OK."""
    path = next(p for p in EXAMPLES if p.name == "sink.properties")
    r = _cli("check", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{path}: OK (job 'orders-archive')")
    assert "  ignored: connector.class (" in r.stdout and r.stderr == ""


# ------------------------------------------------------------------------------------------ errors

def test_bad_config_one_error_line_no_traceback(tmp_path):
    f = tmp_path / "bad.properties"
    f.write_text(BAD)
    r = _cli("check", str(f))
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.count("lakesink: error:") == 1 and r.stderr.startswith("lakesink: error: ")
    assert "Traceback" not in r.stderr
    assert str(f) in r.stderr.splitlines()[0]
    # a ConfigError keeps one line per problem, each indented under the error line
    assert all(ln.startswith("  - ") for ln in r.stderr.splitlines()[1:]), r.stderr
    assert "flush.size='zero'" in r.stderr and "did you mean 'format.class'" in r.stderr


def test_bad_config_json_mode(tmp_path):
    f = tmp_path / "bad.properties"
    f.write_text(BAD)
    r = _cli("--format", "json", "check", str(f))
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert r.stderr.count("lakesink: error:") == 1
    doc = json.loads(r.stdout)
    assert doc["error"]["type"] == "ConfigError" and "flush.size='zero'" in doc["error"]["message"]


def test_debug_shows_the_traceback(tmp_path):
    f = tmp_path / "bad.properties"
    f.write_text(BAD)
    r = _cli("--debug", "check", str(f))
    assert r.returncode == 3
    assert "Traceback (most recent call last)" in r.stderr and "lakesink.errors.ConfigError" in r.stderr
    assert r.stderr.count("lakesink: error:") == 1


def test_single_line_lakesink_error(tmp_path, capsys):
    """A one-line LakesinkError (here a bad --interval) is exactly one stderr line."""
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"name": "j", "topics": "t", "flush.size": "1", "format.class": "json",
                             "s3.bucket.name": "bkt", "manifest.location": str(tmp_path / "m"),
                             "kafka.bootstrap.servers": "127.0.0.1:1"}))
    assert main(["sink", "--config", str(f), "--interval", "soon"]) == 2  # bad usage
    out, err = capsys.readouterr()
    assert err.splitlines() == ["lakesink: error: --interval 'soon': expected a duration like 30s, 5m, 1h or 250ms"]
    assert out == ""


def test_internal_error_one_line(monkeypatch, capsys):
    import lakesink.cli.check as check_cmd

    def boom(path):
        raise RuntimeError("kaput")

    monkeypatch.setattr(check_cmd, "check", boom)
    assert main(["check", "x.properties"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == ["lakesink: internal error: RuntimeError: kaput (run with --debug for the traceback)"]
    assert "Traceback" not in err and out == ""

    assert main(["--debug", "check", "x.properties"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'raise RuntimeError("kaput")' in err
    assert err.splitlines()[-1] == "lakesink: internal error: RuntimeError: kaput"

    assert main(["--format", "json", "check", "x.properties"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": {"type": "RuntimeError", "message": "kaput", "internal": True}}


def test_unreadable_dev_state_is_one_error_line(tmp_path):
    """An OS error inside a command surfaces as its LakesinkError: one line, exit 1 (state file is a directory)."""
    state = tmp_path / "state.json"
    state.mkdir()
    (state / "x").write_text("")
    r = _cli("dev", "status", "--state-file", str(state))
    # reading a directory is an OSError: read_state turns it into a DevStackError
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("lakesink: error: cannot read the dev stack state")


# ------------------------------------------------------------------------------------------ --help

def _subcommands() -> list[list[str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    cmds = []
    for name, p in sub.choices.items():
        cmds.append([name])
        for a in p._actions:
            if a.__class__.__name__ == "_SubParsersAction":
                cmds += [[name, inner] for inner in a.choices]
    return cmds


def test_every_subcommand_is_listed():
    assert _subcommands() == [["sink"], ["vacuum"], ["restore"], ["manifest"], ["manifest", "import"],
                              ["manifest", "handover"], ["check"], ["demo"], ["dev"], ["dev", "up"], ["dev", "down"],
                              ["dev", "status"], ["schema"], ["schema", "history"], ["schema", "check"], ["sql"],
                              ["status"], ["validate"], ["verify"], ["setup"], ["expire"], ["erase"]]


@pytest.mark.parametrize("cmd", _subcommands(), ids=" ".join)
def test_help_of_every_subcommand(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([*cmd, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: lakesink {' '.join(cmd)}")


def test_top_level_help_subprocess():
    r = _cli("--help")
    assert r.returncode == 0
    for word in ("--format", "--debug", "sink", "vacuum", "check", "demo", "dev"):
        assert word in r.stdout
    r = _cli()
    assert r.returncode == 2 and "usage: lakesink" in r.stdout


def test_unknown_format_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--format", "xml", "check", "x"])
    assert e.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_dev_without_action_prints_help(capsys):
    assert main(["dev"]) == 2
    assert "usage: lakesink dev" in capsys.readouterr().out


def test_dev_status_json_not_running(tmp_path, capsys):
    assert main(["--format", "json", "dev", "status", "--state-file", str(tmp_path / "s.json")]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["action"] == "status" and doc["running"] is False and doc["message"] == "dev stack not running"


# ------------------------------------------------------------------------------------------ rendering

def _batch(i: int = 3) -> BatchResult:
    return BatchResult(batch_id=i, run_id="20260101T000000Z-abcdef12", committed_rows=4, objects=3,
                       records=25, bytes=1234, seconds={"plan": 0.5, "write": 1.25, "commit": 0.75})


def _render(output_cls, method: str, obj) -> str:
    buf = io.StringIO()
    getattr(output_cls(out=buf, err=buf), method)(obj)
    return buf.getvalue()


def test_sink_batch_text_is_the_summary_line():
    b = _batch()
    assert _render(TextOutput, "batch", b) == b.summary() + "\n"
    assert b.summary() == ("batch 3: 3 objects, 25 records, 1234 bytes, 4 manifest rows "
                           "(plan 0.50s, write 1.25s, commit 0.75s)")
    assert _render(TextOutput, "render", SinkResult([b])) == ""  # nothing after the per-batch lines


def test_sink_batch_json():
    b = _batch()
    out = _render(JsonOutput, "batch", b)
    assert out.count("\n") == 1
    assert json.loads(out) == {"batch_id": 3, "run_id": "20260101T000000Z-abcdef12", "objects": 3, "records": 25,
                               "bytes": 1234, "committed_rows": 4, "s3_retries": 0,
                               "seconds": {"plan": 0.5, "write": 1.25, "commit": 0.75},
                               "partitions": 0, "records_read": 0, "metrics_warning": None, "dead_lettered": 0,
                               "poll": 0, "committed": True, "note": None}
    assert _render(JsonOutput, "render", SinkResult([b])) == ""


def test_an_uncommitted_poll_in_json_says_so_and_why():
    import dataclasses

    b = dataclasses.replace(_batch(), committed_rows=0, poll=7, objects=0, records=0)
    doc = json.loads(_render(JsonOutput, "batch", b))
    assert (doc["poll"], doc["committed"], doc["note"]) == (7, False, "nothing new to archive, nothing committed")


def _report(deleted=False) -> VacuumReport:
    orphan = ObjectInfo("topics/t/partition=0/t+0+0000000010.json", 42, "e1", 1000.0, None,
                        {"lakesink-job": "job-a"})
    unknown = ObjectInfo("topics/t/partition=0/notes.txt", 7, "e2", 1000.0, "v1", {})
    return VacuumReport(orphans=[orphan], unknown=[unknown], uploads=[("topics/t/partition=0/x.json", "u" * 20)],
                        kept_recent=2, kept_changed=["topics/t/partition=0/k.json"], deleted=deleted)


def _uri(key: str) -> str:
    return f"s3://b/{key}"


@pytest.mark.parametrize("execute", [False, True])
def test_vacuum_text_is_the_report_lines(execute):
    rep = _report(deleted=execute)
    out = _render(TextOutput, "render", VacuumResult(rep, _uri, execute))
    want = rep.lines(_uri) + ([] if execute else ["dry run: pass --execute to delete"])
    assert out.splitlines() == want
    assert ("would delete s3://b/topics/t/partition=0/t+0+0000000010.json (42 bytes)" in out) != execute


def test_vacuum_text_no_dry_run_hint_when_nothing_to_delete():
    rep = VacuumReport(kept_recent=1)
    out = _render(TextOutput, "render", VacuumResult(rep, _uri, False))
    assert out.splitlines() == rep.lines(_uri) and "dry run" not in out


def test_vacuum_json():
    doc = json.loads(_render(JsonOutput, "render", VacuumResult(_report(), _uri, False)))
    assert doc["execute"] is False and doc["deleted"] is False
    assert doc["orphans"] == [{"key": "topics/t/partition=0/t+0+0000000010.json",
                               "uri": "s3://b/topics/t/partition=0/t+0+0000000010.json", "size": 42, "etag": "e1",
                               "last_modified": 1000.0, "version_id": None, "owner": "job-a"}]
    assert doc["unknown"][0]["owner"] is None and doc["unknown"][0]["version_id"] == "v1"
    assert doc["uploads"] == [{"key": "topics/t/partition=0/x.json", "uri": "s3://b/topics/t/partition=0/x.json",
                               "upload_id": "u" * 20}]
    assert doc["kept_recent"] == 2 and doc["kept_changed"][0]["uri"] == "s3://b/topics/t/partition=0/k.json"


def test_check_result_renderings():
    r = CheckResult("c.yaml", "j", ["t"], None, "json", "default", 10, "b", "topics", "/m",
                    [("tasks.max", "framework key")], ["w1"])
    assert _render(TextOutput, "render", r).splitlines() == [
        "c.yaml: OK (job 'j')", "  ignored: tasks.max (framework key)", "  warning: w1"]
    doc = json.loads(_render(JsonOutput, "render", r))
    assert doc["ignored_keys"] == [{"key": "tasks.max", "reason": "framework key"}] and doc["warnings"] == ["w1"]


def test_dev_result_text():
    state = {"bootstrap_servers": "127.0.0.1:9092", "kafka_pid": 11, "s3_endpoint": "http://127.0.0.1:9000",
             "s3_access_key": "testing", "s3_secret_key": "testing", "s3_region": "us-east-1",
             "supervisor_pid": 10, "kafka_port": 9092, "s3_port": 9000}
    up = _render(TextOutput, "render", DevResult("up", True, "dev stack up (state: s, log: l)", state))
    assert up.splitlines()[0] == "dev stack up (state: s, log: l)"
    assert "Kafka bootstrap servers: 127.0.0.1:9092  (pid 11)" in up and "AWS_ENDPOINT_URL=http://127.0.0.1:9000" in up
    st = _render(TextOutput, "render", DevResult("status", True, None, state, ports_open={"kafka": True, "s3": False}))
    assert st.splitlines()[-1] == "Kafka port open, S3 port CLOSED"
    down = _render(TextOutput, "render", DevResult("down", False, "dev stack stopped", state))
    assert down == "dev stack stopped\n"


def test_make_output():
    assert isinstance(make_output("text"), TextOutput) and isinstance(make_output("json"), JsonOutput)


# ------------------------------------------------------------------------------------------ archive errors

class _Fmt:
    name = "json"

    def __init__(self, values=None, exc=None):
        self.values, self.exc = values, exc

    def read(self, stream, view):
        if self.exc:
            raise self.exc
        return iter(self.values)


class _Store:
    def read(self, key, etag=None, version_id=None):
        return b"x"

    def uri(self, key):
        return f"s3://b/{key}"


def _obj(**over):
    from lakesink.driver.archive import ArchivedObject

    row = {"topic": "t", "kafka_partition": 0, "object_key": "topics/t/o.json", "etag": "e", "version_id": None,
           "first_offset": 0, "last_offset": 1, "record_count": 2, "side_files": [], **over}
    return ArchivedObject.from_row(row)


def test_archive_errors_are_lakesink_errors():
    from lakesink.driver.archive import ArchivedObject, iter_objects, read_object
    from lakesink.errors import (CorruptObjectError, ManifestRowError, MissingSideFileError,
                                 RecordCountMismatchError)
    from lakesink.objects.formats.base import RecordView

    assert read_object(_Store(), _Fmt([1, 2]), _obj()) == [1, 2]
    with pytest.raises(MissingSideFileError, match="no keys side file"):
        read_object(_Store(), _Fmt([1, 2]), _obj(), RecordView.KEYS)
    with pytest.raises(RecordCountMismatchError, match="holds 1 records, the manifest says 2"):
        read_object(_Store(), _Fmt([1]), _obj())
    with pytest.raises(CorruptObjectError, match="JSONDecodeError"):
        read_object(_Store(), _Fmt(exc=json.JSONDecodeError("bad", "x", 0)), _obj())
    with pytest.raises(ArchiveReadError, match="unknown record view"):
        read_object(_Store(), _Fmt([1, 2]), _obj(), "nope")
    with pytest.raises(ManifestRowError, match="no 'kafka_partition' field"):
        ArchivedObject.from_row({"topic": "t"})
    with pytest.raises(ManifestRowError, match="'kind'"):
        list(iter_objects([{"topic": "t"}]))
    sides = [{"view": "keys", "key": "topics/t/o.keys.json", "etag": "k", "version_id": None}]
    assert read_object(_Store(), _Fmt([1, 2]), _obj(side_files=sides), RecordView.KEYS) == [1, 2]
    for cls in (ArchiveReadError, MissingSideFileError, RecordCountMismatchError, CorruptObjectError):
        assert issubclass(cls, LakesinkError) and not issubclass(cls, (ValueError, LookupError))
    assert issubclass(ConfigError, LakesinkError)


def test_seconds_since_process_start_is_this_processes_age():
    import time

    from lakesink.cli.sink import seconds_since_process_start

    a = seconds_since_process_start()
    time.sleep(0.05)
    b = seconds_since_process_start()
    assert 0 < a < b < 24 * 3600


def test_global_options_work_after_the_subcommand_too(tmp_path, capsys):
    import json as _json
    from pathlib import Path

    from lakesink.cli.main import main

    example = Path(__file__).resolve().parents[2] / "schemas" / "examples" / "sink.properties"
    assert main(["check", str(example), "--format", "json"]) == 0
    assert _json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["--format", "json", "check", str(example)]) == 0
    assert _json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_exit_codes_tell_config_fencing_dependency_and_record_failures_apart(tmp_path, capsys):
    from lakesink import errors

    assert errors.ConfigError([]).exit_code == 3
    assert errors.FencedError("batch 3 was committed by run r2").exit_code == 4
    for e in (errors.KafkaMetadataError("x"), errors.StoreError("x"), errors.ManifestError("x"),
              errors.KafkaReadError("x"), errors.RegistryError("x")):
        assert e.exit_code == 5, type(e)
    assert errors.DecodeError("t", 0, 5, "bad").exit_code == 6
    # an executor failure takes the code of the lakesink error that caused it
    assert errors.BatchFailedError("batch 0 …", cause="PartitionError").exit_code == 6
    assert errors.BatchFailedError("batch 0 …", cause="KafkaReadError").exit_code == 5
    assert errors.BatchFailedError("batch 0 …", cause="StoreError").exit_code == 5
    assert errors.BatchFailedError("batch 0 …", cause="Py4JJavaError").exit_code == 1
    assert errors.InvalidArgumentError("x").exit_code == 2
    # and the CLI exits with it
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    assert "exit status: 0 success; 1 failed" in " ".join(capsys.readouterr().out.split())


def test_version_prints_the_installed_version_and_exits_0():
    from lakesink import __version__

    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "--version"], capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (
        0, f"lakesink {__version__}; native kernels: lakesink-native 0.2.0", "")  # a checkout builds it
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "--version"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "LAKESINK_NATIVE": "0"})
    assert (r.returncode, r.stdout.strip()) == (0, f"lakesink {__version__}; native kernels off (LAKESINK_NATIVE=0)")
