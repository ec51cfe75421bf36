"""Arguments are validated before any side effect (issue #14 item 3): a bad ``--interval`` is reported before
the manifest table is created or any service is contacted."""
from __future__ import annotations


from lakesink.cli.main import main


def test_bad_interval_reported_before_manifest_is_created(tmp_path, capsys):
    manifest = tmp_path / "manifest"
    cfg = tmp_path / "job.properties"
    cfg.write_text("\n".join([
        "name=job-args", "topics=t", "flush.size=10", "format.class=json", "s3.bucket.name=bucket-a",
        f"store.url=file://{tmp_path / 'store'}", f"manifest.location={manifest}",
        "kafka.bootstrap.servers=127.0.0.1:1",  # nothing listens: a contacted broker would fail differently
    ]))
    rc = main(["sink", "--config", str(cfg), "--once", "--interval", "soon"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "--interval 'soon'" in err and len(err.strip().splitlines()) == 1, err
    assert not manifest.exists() and not (tmp_path / "store").exists()
