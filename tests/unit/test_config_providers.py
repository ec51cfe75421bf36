"""Kafka config providers in config values: ``${file:…}``, ``${directory:…}``, ``${env:…}``
(lakesink.config.providers), and the resolved values masked wherever lakesink shows a config."""
import json
import os
import subprocess
import sys

import pytest

from lakesink.cli.main import main
from lakesink.config import SinkConfig, load_config
from lakesink.config.keys import MASK
from lakesink.config.providers import RESOLVED_VALUES, EnvProvider, resolve
from lakesink.errors import ConfigError, LakesinkError

BASE = {"name": "job", "topics": "a,b", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092"}
SECRET = "Sup3r-S3cret-Value"  # what must never be shown
KAFKA = "org.apache.kafka.common.config.provider."


@pytest.fixture(autouse=True)
def forget_resolved():
    """The CLI masks every value resolved in the process; other tests' error lines must not see ours."""
    yield
    RESOLVED_VALUES.clear()


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    """A properties file, a secrets directory and an environment variable holding secrets."""
    props = tmp_path / "creds.properties"
    props.write_text(f"aws.secret=  {SECRET}\nescaped=a\\tb\\u00e9\nbucket=hidden-bucket\n", encoding="utf-8")
    d = tmp_path / "secrets"
    d.mkdir()
    (d / "pw").write_text("dir-pass-word\n")
    monkeypatch.setenv("LAKESINK_TEST_KEY_ID", "AKIAFROMENVIRONMENT")
    return {"props": str(props), "dir": str(d)}


def problems_of(values: dict) -> list:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, **values})
    return ei.value.problems


def one_problem(values: dict):
    ps = problems_of(values)
    assert len(ps) == 1, ps
    return ps[0]


# ------------------------------------------------------------------------------------------ resolution

def test_file_provider_returns_the_key_of_a_properties_file(secrets):
    c = SinkConfig.from_dict({**BASE, "aws.access.key.id": "AKIAPLAIN",
                              "aws.secret.access.key": "${file:%s:aws.secret}" % secrets["props"]})
    assert c.aws_secret_access_key.reveal() == SECRET  # Java Properties: the separator's spaces are not the value
    assert "aws.secret.access.key" in c.provided_keys and "aws.access.key.id" not in c.provided_keys


def test_file_provider_reads_java_escapes_and_several_references_in_one_value(secrets):
    r = resolve({"x": "${file:%s:escaped}/${file:%s:bucket}/${env:LAKESINK_TEST_KEY_ID}" % (secrets["props"],
                                                                                              secrets["props"])})
    assert r.config == {"x": "a\tbé/hidden-bucket/AKIAFROMENVIRONMENT"} and r.keys == {"x"}


def test_directory_provider_returns_a_files_content_as_it_is(secrets):
    r = resolve({"kafka.sasl.password": "${directory:%s:pw}" % secrets["dir"]})
    assert r.config["kafka.sasl.password"] == "dir-pass-word\n"  # Connect keeps the newline too


def test_env_provider_and_its_allowlist_pattern(monkeypatch):
    monkeypatch.setenv("APP_PW", "from-env")
    monkeypatch.setenv("OTHER_PW", "not-allowed")
    assert resolve({"k": "${env:APP_PW}"}).config == {"k": "from-env"}
    decl = {"config.providers": "env", "config.providers.env.class": KAFKA + "EnvVarConfigProvider",
            "config.providers.env.param.allowlist.pattern": "APP_.*"}
    assert resolve({**decl, "k": "${env:APP_PW}"}).config == {"k": "from-env"}
    with pytest.raises(ConfigError) as ei:
        resolve({**decl, "k": "${env:OTHER_PW}"})
    assert str(ei.value) == ("k='${env:OTHER_PW}': config provider 'env': environment variable 'OTHER_PW' does not "
                             "match config.providers.env.param.allowlist.pattern")
    assert EnvProvider("env", {}, environ={"A": "1"}).get("", {"A", "B"}) == {"A": "1"}


def test_a_resolved_value_is_not_resolved_again(tmp_path):
    f = tmp_path / "p.properties"
    f.write_text("v=${env:HOME}\n")
    assert resolve({"k": "${file:%s:v}" % f}).config == {"k": "${env:HOME}"}


def test_the_python_api_and_every_source_shape_resolve(secrets, tmp_path):
    ref = "${file:%s:bucket}" % secrets["props"]
    assert load_config({**BASE, "s3.bucket.name": ref}).s3_bucket_name == "hidden-bucket"
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"name": "job", "config": {**BASE, "s3.bucket.name": ref}}))
    assert load_config(f).s3_bucket_name == "hidden-bucket"
    y = tmp_path / "c.yaml"
    y.write_text("".join(f"{k}: '{v}'\n" for k, v in {**BASE, "s3.bucket.name": ref}.items()))
    assert load_config(y).s3_bucket_name == "hidden-bucket"


def test_without_references_no_provider_is_configured_or_checked():
    c = SinkConfig.from_dict({**BASE, "config.providers": "vault", "config.providers.vault.class": "com.x.Vault"})
    assert c.provided_keys == frozenset() and "config.providers" not in c.raw


# ----------------------------------------------------------------------------------- declaring providers

def test_declared_providers_are_the_only_ones(secrets):
    decl = {"config.providers": "secretfile", "config.providers.secretfile.class": KAFKA + "FileConfigProvider"}
    c = SinkConfig.from_dict({**BASE, **decl, "s3.bucket.name": "${secretfile:%s:bucket}" % secrets["props"]})
    assert c.s3_bucket_name == "hidden-bucket"
    p = one_problem({**decl, "aws.access.key.id": "${env:LAKESINK_TEST_KEY_ID}", "aws.secret.access.key": "x"})
    assert (p.key, p.value) == ("aws.access.key.id", "${env:LAKESINK_TEST_KEY_ID}")
    assert p.message == "unknown config provider 'env' (declared: secretfile; config.providers names them)"


def test_an_unknown_provider_without_a_declaration():
    p = one_problem({"s3.region": "${vault:secret/data:region}"})
    assert (p.key, p.value) == ("s3.region", "${vault:secret/data:region}")
    assert p.message.startswith("unknown config provider 'vault' (lakesink's are file, directory and env")


def test_a_provider_class_lakesink_does_not_implement_is_an_error():
    p = one_problem({"config.providers": "vault", "config.providers.vault.class": "com.github.jcustenborder.Vault",
                     "s3.region": "${vault:secret/data:region}"})
    assert p.key == "config.providers.vault.class" and p.message.startswith("is not a provider lakesink implements")
    p = one_problem({"config.providers": "f", "s3.region": "${f:/x:y}"})
    assert (p.key, p.message) == ("config.providers.f.class", "is required: config.providers declares 'f'")


def test_a_misspelt_or_undeclared_provider_setting_is_an_error_not_ignored(secrets):
    ref = {"s3.region": "${file:%s:bucket}" % secrets["props"]}
    p = one_problem({**ref, "config.providers.file.param.allowed.path": "/etc"})  # allowed.paths, misspelt
    assert p.key == "config.providers.file.param.allowed.path"
    assert p.message == "is not a parameter of FileConfigProvider (it takes: allowed.paths)"
    p = one_problem({**ref, "config.providers": "file", "config.providers.file.class": KAFKA + "FileConfigProvider",
                     "config.providers.env.param.allowlist.pattern": ".*"})
    assert p.message == "provider 'env' is not declared in config.providers (declared: file)"


def test_allowed_paths_confine_the_file_and_directory_providers(secrets, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "p.properties").write_text("k=v\n")
    params = {"config.providers.file.param.allowed.paths": secrets["dir"] + "," + secrets["props"],
              "config.providers.directory.param.allowed.paths": secrets["dir"]}
    r = resolve({**params, "a": "${file:%s:bucket}" % secrets["props"], "b": "${directory:%s:pw}" % secrets["dir"]})
    assert r.config == {"a": "hidden-bucket", "b": "dir-pass-word\n"}
    for ref in ("${file:%s:k}" % (other / "p.properties"),
                "${file:%s/../elsewhere/p.properties:k}" % secrets["dir"]):  # normalised, as Kafka does
        with pytest.raises(ConfigError) as ei:
            resolve({**params, "a": ref})
        assert "is outside config.providers.file.param.allowed.paths" in str(ei.value) and ref in str(ei.value)
    with pytest.raises(ConfigError, match="allowed.paths: 'relative/dir' is not absolute"):
        resolve({"config.providers.file.param.allowed.paths": "relative/dir", "a": "${file:/x:y}"})


# ---------------------------------------------------------------------------------------------- errors

def test_a_missing_file_key_or_variable_names_the_key_and_the_reference(secrets, monkeypatch):
    monkeypatch.delenv("LAKESINK_NO_SUCH_VAR", raising=False)
    cases = {
        "${file:/no/such/file.properties:k}": "config provider 'file': file '/no/such/file.properties' does not exist",
        "${file:%s:nokey}" % secrets["props"]: f"config provider 'file': file {secrets['props']!r} has no key 'nokey'",
        "${directory:%s:nofile}" % secrets["dir"]: f"config provider 'directory': directory {secrets['dir']!r} has no "
                                                   f"file 'nofile'",
        "${env:LAKESINK_NO_SUCH_VAR}": "config provider 'env': environment variable 'LAKESINK_NO_SUCH_VAR' is not set",
        "${env:some/path:VAR}": "config provider 'env': takes no path (write ${env:VARIABLE})",
        "${file:k}": "config provider 'file': needs a path (${file:/path/file.properties:key})",
    }
    for ref, message in cases.items():
        p = one_problem({"s3.region": "eu-${x}-" + ref})
        assert (p.key, p.value, p.message) == ("s3.region", ref, message)


def test_every_unresolvable_reference_is_listed_at_once(monkeypatch):
    monkeypatch.delenv("LAKESINK_NO_SUCH_VAR", raising=False)
    ps = problems_of({"s3.region": "${env:LAKESINK_NO_SUCH_VAR}", "name": "${nope:x}"})
    assert sorted(p.key for p in ps) == ["name", "s3.region"]


def test_cli_error_is_one_line_with_exit_3_and_no_value(secrets, tmp_path, capsys):
    f = tmp_path / "c.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in BASE.items())
                 + "aws.access.key.id=${env:LAKESINK_TEST_KEY_ID}\n"
                 + "aws.secret.access.key=${file:%s:missing}\n" % secrets["props"])
    assert main(["check", str(f)]) == 3
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err == [f"lakesink: error: {f}: aws.secret.access.key='${{file:{secrets['props']}:missing}}': config "
                   f"provider 'file': file {secrets['props']!r} has no key 'missing'"]
    assert "AKIAFROMENVIRONMENT" not in captured.out + captured.err


# ------------------------------------------------------------------------------------------------ masking

def test_a_provided_value_is_masked_in_validation_errors(secrets, monkeypatch):
    monkeypatch.setenv("LAKESINK_TEST_BUCKET", "Not_A_Valid_Bucket")
    p = one_problem({"s3.bucket.name": "${env:LAKESINK_TEST_BUCKET}"})
    assert (p.key, p.value) == ("s3.bucket.name", MASK) and "Not_A_Valid_Bucket" not in str(p)
    # a provided value quoted in another key's message is masked there too
    monkeypatch.setenv("LAKESINK_TEST_ISO", "read_committed")
    p = one_problem({"kafka.isolation.level": "${env:LAKESINK_TEST_ISO}",
                     "consumer.override.isolation.level": "read_uncommitted"})
    assert p.key == "consumer.override.isolation.level"
    assert f"conflicts with kafka.isolation.level='{MASK}'" in p.message and "read_committed" not in p.message


def test_debug_traceback_carries_no_unmasked_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("LAKESINK_TEST_BUCKET", "Not_A_Valid_Bucket")
    f = tmp_path / "c.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "s3.bucket.name": "${env:LAKESINK_TEST_BUCKET}"}.items()))
    assert main(["--debug", "check", str(f)]) == 3
    captured = capsys.readouterr()
    assert "Traceback" in captured.err and "Not_A_Valid_Bucket" not in captured.out + captured.err


def test_a_provided_value_is_masked_in_repr_as_dict_raw_and_warnings(secrets, tmp_path):
    ref = "${file:%s:bucket}" % secrets["props"]
    c = SinkConfig.from_dict({**BASE, "s3.bucket.name": ref, "name": "${env:LAKESINK_TEST_KEY_ID}"}, name="other")
    assert c.s3_bucket_name == "hidden-bucket"
    assert c.as_dict()["s3.bucket.name"] == MASK and c.as_dict(redact=False)["s3.bucket.name"] == "hidden-bucket"
    assert "hidden-bucket" not in repr(c) and c.raw["s3.bucket.name"] == ref  # raw shows the reference
    assert any("differs from the Connect name" in w for w in c.warnings)
    assert not any("AKIAFROMENVIRONMENT" in w for w in c.warnings)


def test_cli_check_masks_provided_values_in_text_and_json(secrets, tmp_path, capsys):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"name": "connect-name", "config": {
        **BASE, "name": "${env:LAKESINK_TEST_KEY_ID}", "s3.bucket.name": "${file:%s:bucket}" % secrets["props"],
        "aws.access.key.id": "${env:LAKESINK_TEST_KEY_ID}",
        "aws.secret.access.key": "${file:%s:aws.secret}" % secrets["props"]}}))
    assert main(["check", str(f)]) == 0
    text = capsys.readouterr().out
    assert main(["--format", "json", "check", str(f)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bucket"] == MASK and doc["name"] == "connect-name" and doc["topics"] == ["a", "b"]
    for out in (text, json.dumps(doc)):
        assert "hidden-bucket" not in out and SECRET not in out and "AKIAFROMENVIRONMENT" not in out
    assert any("differs from the Connect name" in w for w in doc["warnings"])


def test_a_runtime_error_quoting_a_provided_value_is_masked_on_every_output(secrets, tmp_path, capsys,
                                                                          monkeypatch):
    """An error after loading (an S3 error naming the bucket, say) is masked on the error line and in JSON."""
    import lakesink.cli.check as check_cmd

    f = tmp_path / "c.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "s3.bucket.name": "${file:%s:bucket}"
                                                   % secrets["props"]}.items()))

    def failing(path):
        cfg = load_config(path)
        raise LakesinkError(f"bucket {cfg.s3_bucket_name!r} does not exist")

    monkeypatch.setattr(check_cmd, "check", failing)
    assert main(["check", str(f)]) == 1
    assert capsys.readouterr().err.strip() == f"lakesink: error: bucket '{MASK}' does not exist"
    assert main(["--format", "json", "check", str(f)]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["message"] == f"bucket '{MASK}' does not exist"
    assert "hidden-bucket" not in captured.out + captured.err


AIVEN = {"name": "orders-s3", "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
         "topics": "orders", "file.max.records": "500", "kafka.bootstrap.servers": "b:9092"}


def test_check_translate_writes_references_back_and_withholds_derived_values(secrets, tmp_path, capsys,
                                                                              monkeypatch):
    monkeypatch.setenv("LAKESINK_TEST_FORMAT", "parquet")
    bucket_ref = "${file:%s:bucket}" % secrets["props"]
    secret_ref = "${file:%s:aws.secret}" % secrets["props"]
    src = tmp_path / "aiven.json"
    src.write_text(json.dumps({"name": "orders-s3", "config": {
        **AIVEN, "aws.s3.bucket.name": bucket_ref, "aws_access_key_id": "${env:LAKESINK_TEST_KEY_ID}",
        "aws_secret_access_key": secret_ref, "format.output.type": "${env:LAKESINK_TEST_FORMAT}",
        "config.providers.file.param.allowed.paths": str(tmp_path)}}))
    assert main(["check", "--translate", str(src)]) == 0
    out = capsys.readouterr().out
    assert f"s3.bucket.name={bucket_ref}\n" in out and f"aws.secret.access.key={secret_ref}\n" in out
    assert "aws.access.key.id=${env:LAKESINK_TEST_KEY_ID}\n" in out
    assert f"config.providers.file.param.allowed.paths={tmp_path}\n" in out
    assert "# not printed (derived from a config provider value): format.class" in out
    assert f"manifest.location=s3a://{bucket_ref}/_lakesink/manifest" in out
    for secret in ("hidden-bucket", SECRET, "AKIAFROMENVIRONMENT"):
        assert secret not in out
    assert main(["--format", "json", "check", "--translate", str(src)]) == 0
    raw = capsys.readouterr().out
    doc = json.loads(raw)
    assert "format.class" in doc["withheld"] and "hidden-bucket" not in raw and SECRET not in raw
    # the translated config loads, and resolves its references again
    dst = tmp_path / "lakesink.properties"
    dst.write_text(doc["properties"] + "format.class=json\n")
    c = load_config(dst)
    assert c.s3_bucket_name == "hidden-bucket" and c.aws_secret_access_key.reveal() == SECRET


# -------------------------------------------------------------------------------------------- the CLI

def test_cli_check_subprocess_resolves_file_and_env_secrets_and_never_prints_them(secrets, tmp_path):
    f = tmp_path / "sink.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in BASE.items())
                 + "aws.access.key.id=${env:LAKESINK_TEST_KEY_ID}\n"
                 + "aws.secret.access.key=${file:%s:aws.secret}\n" % secrets["props"]
                 + "s3.bucket.name=${file:%s:bucket}\n" % secrets["props"]
                 + "kafka.security.protocol=SASL_SSL\nkafka.sasl.mechanism=PLAIN\n"
                 + 'kafka.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="u" password="${directory:%s:pw}";\n' % secrets["dir"])
    env = {**os.environ, "LAKESINK_TEST_KEY_ID": "AKIAFROMENVIRONMENT"}
    for fmt in ("text", "json"):
        r = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", fmt, "check", str(f)],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        both = r.stdout + r.stderr
        for secret in (SECRET, "AKIAFROMENVIRONMENT", "hidden-bucket", "dir-pass-word"):
            assert secret not in both, (fmt, both)
    assert json.loads(r.stdout)["bucket"] == MASK
    assert r.stdout and "OK" not in r.stdout  # the json run: a document, not the text line
