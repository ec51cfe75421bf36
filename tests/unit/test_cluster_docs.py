"""docs/cluster.md's files: the IAM policy covers every S3 call lakesink's store makes; the Databricks job
definition is a Jobs API 2.1 wheel task naming the wheel's real entry point."""
import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# boto3 S3 operation → the IAM action that authorises it (multipart steps are authorised by s3:PutObject)
ACTION = {
    "put_object": "s3:PutObject", "create_multipart_upload": "s3:PutObject", "upload_part": "s3:PutObject",
    "complete_multipart_upload": "s3:PutObject", "abort_multipart_upload": "s3:AbortMultipartUpload",
    "head_object": "s3:GetObject", "get_object": "s3:GetObject", "delete_object": "s3:DeleteObject",
    "list_objects_v2": "s3:ListBucket", "list_multipart_uploads": "s3:ListBucketMultipartUploads",
    "list_parts": "s3:ListMultipartUploadParts",
}


def store_operations() -> set[str]:
    src = "".join(p.read_text() for p in sorted((ROOT / "lakesink" / "store").glob("*.py")))
    return set(re.findall(r"client\.([a-z_0-9]+)\(", src)) | set(re.findall(r'_pages\("([a-z_0-9]+)"', src))


def test_iam_policy_covers_every_store_operation():
    policy = json.loads((ROOT / "docs" / "iam-policy.json").read_text())
    granted = {a for st in policy["Statement"] if st["Effect"] == "Allow" for a in st["Action"]}
    ops = store_operations()
    assert {"put_object", "get_object", "list_objects_v2", "abort_multipart_upload"} <= ops, ops
    unknown = ops - ACTION.keys()
    assert not unknown, f"lakesink/store calls S3 operations with no IAM action mapped here: {unknown}"
    missing = {op: ACTION[op] for op in ops if ACTION[op] not in granted}
    assert not missing, f"docs/iam-policy.json lacks {missing}"
    assert "s3:ListMultipartUploadParts" in granted  # S3A and delta-rs resume/abort multipart uploads


def test_iam_policy_lists_only_lakesink_prefixes():
    policy = json.loads((ROOT / "docs" / "iam-policy.json").read_text())
    for st in policy["Statement"]:
        if "s3:ListBucket" in st["Action"]:
            assert st["Resource"].count("/") == 0 and st["Condition"]["StringLike"]["s3:prefix"]
        else:
            resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
            assert all(r.endswith("/*") and r.count("/") >= 1 for r in resources), resources


def test_databricks_job_is_a_wheel_task_on_the_real_entry_point():
    job = json.loads((ROOT / "docs" / "databricks-job.json").read_text())
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    (task,) = job["tasks"]
    wt = task["python_wheel_task"]
    assert wt["package_name"] == "lakesink" and wt["entry_point"] in scripts
    assert wt["parameters"][:2] == ["sink", "--config"] and "--once" in wt["parameters"]
    assert any(lib.get("whl", "").endswith(".whl") for lib in task["libraries"])
    assert {c["job_cluster_key"] for c in job["job_clusters"]} == {task["job_cluster_key"]}
    assert job["max_concurrent_runs"] == 1  # one writer per job name: a second run would be fenced


def test_cluster_doc_links_its_files_and_readme_links_it():
    doc = (ROOT / "docs" / "cluster.md").read_text()
    for name in ("iam-policy.json", "databricks-job.json", "spark-submit", "s3.credentials.source"):
        assert name in doc, name
    assert "docs/cluster.md" in (ROOT / "README.md").read_text()
