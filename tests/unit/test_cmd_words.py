"""Issue #26 item 6: each outcome of status / vacuum / schema check / the S3 preflight has its own words and exit
status. Missing S3 credentials are said as such (exit 3, where lakesink looked), not as an endpoint that is not
reachable; vacuum and status run sink's store preflight, so an S3 endpoint that accepts and never answers fails in
one line with exit 5; a job that never ran is NEVER RUN, not OK; a schema check with nothing to compare fails
unless --allow-empty. No service here: a closed port, a socket that never answers, pure report builders."""
from __future__ import annotations

import datetime as dt
import io
import json
import socket

import pytest

from lakesink import cli
from lakesink.cli.output import JsonOutput, SchemaCheckResult, StatusResult, TextOutput
from lakesink.config import load_config
from lakesink.credentials import where_looked
from lakesink.driver import preflight
from lakesink.driver.schema_check import SchemaCheckReport
from lakesink.driver.status import Thresholds, build_report
from lakesink.errors import EXIT_CONFIG, EXIT_UNREACHABLE, S3CredentialsError
from lakesink.store import open_store
from lakesink import wiring

NOW = dt.datetime(2026, 11, 26, 12, 0, 0)
#: Every variable of the AWS default credential chain; the tests empty them all.
CHAIN_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE",
              "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
              "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
              "AWS_CONTAINER_AUTHORIZATION_TOKEN")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_aws_credentials(monkeypatch):
    """The AWS environment emptied: no keys, no profile files, no instance metadata."""
    for name in CHAIN_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def s3_job(tmp_path, url: str, **over) -> str:
    """A job file on an S3 endpoint at ``url`` with no keys in it (the default chain); returns its path."""
    d = {"name": "job-words", "topics": "t", "flush.size": "10", "format.class": "json",
         "s3.bucket.name": "bucket-words", "store.url": url, "s3.region": "us-east-1",
         "manifest.location": "s3a://bucket-words/_lakesink/manifest",
         "kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}", **over}
    path = tmp_path / "job.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in d.items()))
    return str(path)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lakesink: error: "), err
    return err[0]


# ------------------------------------------------------------------------------------- (a) missing credentials


def assert_says_where_it_looked(line: str) -> None:
    assert "no S3 credentials found for" in line, line
    assert "not reachable" not in line and "Unable to locate credentials" not in line, line
    for where in ("aws.access.key.id", "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY unset", "/nonexistent (missing)",
                  "AWS_WEB_IDENTITY_TOKEN_FILE unset", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI unset",
                  "EC2 instance metadata (disabled by AWS_EC2_METADATA_DISABLED)"):
        assert where in line, (where, line)


@pytest.mark.parametrize("command", [["vacuum"], ["status"], ["schema", "history"],
                                     ["schema", "check", "--schema", "candidate.avsc"]])
def test_missing_credentials_are_one_line_exit_3_naming_where_lakesink_looked(tmp_path, capsys, no_aws_credentials,
                                                                            command):
    url = f"http://127.0.0.1:{closed_port()}"
    rc = cli.main([*command, "--config", s3_job(tmp_path, url)])
    line = one_error_line(capsys)
    assert rc == EXIT_CONFIG, line
    assert f"S3 endpoint {url} (bucket 'bucket-words')" in line
    assert_says_where_it_looked(line)


def test_sink_preflight_says_missing_credentials_with_exit_3(tmp_path, no_aws_credentials):
    """What `lakesink sink` runs before anything else (cli.sink.run_preflight): the same error, before the broker."""
    cfg = load_config(s3_job(tmp_path, f"http://127.0.0.1:{closed_port()}"))
    with pytest.raises(S3CredentialsError) as e:
        preflight.preflight(cfg, timeout_s=2.0)
    assert e.value.exit_code == EXIT_CONFIG
    assert_says_where_it_looked(str(e.value))


def test_check_credentials_asks_no_endpoint(tmp_path, no_aws_credentials):
    """The request-free half, for commands that read the manifest before their first boto3 call (restore)."""
    cfg = load_config(s3_job(tmp_path, f"http://127.0.0.1:{closed_port()}"))
    with pytest.raises(S3CredentialsError) as e:
        preflight.check_credentials(cfg)
    assert_says_where_it_looked(str(e.value))
    preflight.check_credentials(load_config(s3_job(tmp_path, f"file://{tmp_path}/store",
                                                   **{"manifest.location": str(tmp_path / "m")})))  # local: nothing


def test_a_store_call_without_credentials_fails_at_once_with_the_same_words(tmp_path, no_aws_credentials):
    """Every S3 call (restore's object checks, executors, vacuum's listing) goes through S3Store.call: no retry
    of a missing key, and the credentials words, not 'failed: Unable to locate credentials (gave up after ...)'."""
    cfg = load_config(s3_job(tmp_path, f"http://127.0.0.1:{closed_port()}", **{"s3.part.retries": "5"}))
    store = open_store(wiring.store_settings(cfg))
    with pytest.raises(S3CredentialsError) as e:
        list(store.list("topics/"))
    assert store.retries == 0
    assert "ListObjectsV2 s3://bucket-words/topics/" in str(e.value) and "gave up" not in str(e.value)
    assert_says_where_it_looked(str(e.value))


def test_half_a_key_pair_or_an_unknown_profile_is_said_without_showing_a_secret(tmp_path, capsys, monkeypatch,
                                                                               no_aws_credentials):
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAHALFPAIR")
    assert cli.main(["vacuum", "--config", s3_job(tmp_path, url)]) == EXIT_CONFIG
    line = one_error_line(capsys)
    assert "no S3 credentials found" in line and "AWS_SECRET_ACCESS_KEY" in line and "AKIAHALFPAIR" not in line
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    assert cli.main(["vacuum", "--config", s3_job(tmp_path, url)]) == EXIT_CONFIG
    line = one_error_line(capsys)
    assert "no S3 credentials found" in line and "profile 'no-such-profile' (AWS_PROFILE)" in line, line


def test_where_looked_names_the_keys_and_the_chain_and_no_value():
    env = {"AWS_SHARED_CREDENTIALS_FILE": "/etc/none/creds", "AWS_CONFIG_FILE": "/etc/none/config",
           "AWS_PROFILE": "ops", "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token-file"}
    text = where_looked(None, env)
    assert "aws.access.key.id/aws.secret.access.key are not in the config" in text
    assert "profile 'ops' (AWS_PROFILE) in /etc/none/creds (missing) and /etc/none/config (missing)" in text
    assert "web identity (AWS_WEB_IDENTITY_TOKEN_FILE set)" in text and "/var/run/token-file" not in text
    assert "EC2 instance metadata (no answer)" in text


# ------------------------------------------------------------------------------------- (d) vacuum preflight


class BlackHole:
    """An S3 endpoint that accepts TCP connections (the kernel's backlog) and never answers a byte."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [["vacuum", "--retention", "0s"], ["status"]])
def test_an_s3_endpoint_that_never_answers_fails_vacuum_and_status_in_one_line_exit_5(tmp_path, capsys, monkeypatch,
                                                                                      command):
    monkeypatch.setattr(preflight, "TIMEOUT_S", 1.0)  # the preflight's per-call timeout (10 s in a real run)
    hole = BlackHole()
    try:
        path = s3_job(tmp_path, hole.url, **{"aws.access.key.id": "AKIAWORDS", "aws.secret.access.key": "s3cr3t"})
        rc = cli.main([*command, "--config", path])
    finally:
        hole.close()
    line = one_error_line(capsys)
    assert rc == EXIT_UNREACHABLE, line
    assert f"S3 endpoint {hole.url} is not reachable (preflight HeadBucket of data (s3.bucket.name) bucket " \
           f"'bucket-words')" in line, line
    assert "s3cr3t" not in line


# ------------------------------------------------------------------------------------- (b) status: never run


def never_ran(thresholds: Thresholds, end: int = 1_660_000, manifest_exists: bool = True):
    return build_report("j", "s3a://b/m", {}, {("t", 0): (0, end)}, [], thresholds, NOW,
                        manifest_exists=manifest_exists)


def test_a_job_that_never_ran_is_never_run_not_ok_and_unhealthy_when_records_wait():
    rep = never_ran(Thresholds())
    assert rep.state == "NEVER RUN" and rep.never_ran and rep.exit_code == 1 and rep.total_lag == 1_660_000
    assert rep.note == "no batch committed yet for job 'j' (manifest s3a://b/m: no row of job 'j')"
    assert rep.problems == ["1660000 record(s) waiting and no batch committed yet for job 'j'; pass --max-lag or "
                            "--max-age to judge a job that has not run by thresholds"]
    assert never_ran(Thresholds(), manifest_exists=False).note.endswith("(manifest s3a://b/m: no table there yet)")
    # nothing to archive yet (an empty topic): not unhealthy, but still not OK
    rep = never_ran(Thresholds(), end=0)
    assert rep.state == "NEVER RUN" and rep.exit_code == 0 and rep.problems == []


def test_thresholds_judge_a_job_that_never_ran():
    rep = never_ran(Thresholds(max_lag=1000))
    assert rep.state == "NEVER RUN" and rep.exit_code == 1 and rep.problems == ["t-0: lag 1660000 > --max-lag 1000"]
    rep = never_ran(Thresholds(max_lag=2_000_000))
    assert rep.state == "NEVER RUN" and rep.exit_code == 0 and rep.problems == []
    rep = never_ran(Thresholds(max_age_s=900))
    assert rep.exit_code == 1 and rep.problems == ["t-0: 1660000 record(s) waiting and nothing ever committed"]


def test_a_job_that_ran_is_not_never_run():
    rep = build_report("j", "m", {("t", 0): (5, NOW)}, {("t", 0): (0, 5)}, [], Thresholds(), NOW)
    assert rep.state == "OK" and not rep.never_ran and rep.note is None


def test_never_run_rendering_text_and_json():
    out = io.StringIO()
    TextOutput(out=out).render(StatusResult(never_ran(Thresholds())))
    text = out.getvalue()
    assert "job 'j': NEVER RUN, UNHEALTHY (1 problem(s)); 1 partition(s), lag 1660000 record(s)" in text, text
    assert "  no batch committed yet for job 'j' (manifest s3a://b/m: no row of job 'j')" in text
    assert ": OK" not in text
    out = io.StringIO()
    TextOutput(out=out).render(StatusResult(never_ran(Thresholds(), end=0)))
    assert "job 'j': NEVER RUN; 1 partition(s), lag 0 record(s)" in out.getvalue()
    out = io.StringIO()
    JsonOutput(out=out).render(StatusResult(never_ran(Thresholds(max_lag=10))))
    doc = json.loads(out.getvalue())
    assert doc["state"] == "NEVER RUN" and doc["never_ran"] is True and doc["healthy"] is False
    assert doc["note"].startswith("no batch committed yet for job 'j'")


# ------------------------------------------------------------------------------------- (c) schema check: empty


def empty_check(allow_empty: bool, compared=()) -> SchemaCheckReport:
    return SchemaCheckReport(topic="t", subject="t-value", mode="BACKWARD", candidate_fingerprint="f" * 64,
                             versions=[], compared=list(compared), incompatibilities=[],
                             nothing_to_compare="no schema version of t to compare with: its 3 archived object(s) "
                                                "(json) carry no schema", allow_empty=allow_empty)


@pytest.mark.parametrize("allow_empty", [False, True])
def test_nothing_to_compare_fails_unless_allowed_with_the_same_words(allow_empty):
    rep = empty_check(allow_empty)
    assert rep.exit_code == (0 if allow_empty else 1) and rep.compatible and rep.passed is allow_empty
    out = io.StringIO()
    TextOutput(out=out).render(SchemaCheckResult(rep))
    text = out.getvalue()
    assert ("NOTHING TO COMPARE (BACKWARD): no schema version of t to compare with: its 3 archived object(s) (json) "
            "carry no schema; ") in text, text
    assert ("accepted (--allow-empty)" if allow_empty else "not passed (--allow-empty accepts it)") in text
    assert "compatible (" not in text
    out = io.StringIO()
    JsonOutput(out=out).render(SchemaCheckResult(rep))
    doc = json.loads(out.getvalue())
    assert doc["passed"] is allow_empty and doc["nothing_to_compare"].startswith("no schema version of t")
