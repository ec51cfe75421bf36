"""The docs site and the README (issue #27): mkdocs.yml builds with --strict (a broken link or anchor fails it), every
page under docs/ is in the nav, the README stays a five-minute read and its relative links resolve."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 300
# [text](target): the target up to the first space or ')'; images too
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` with this interpreter (the venv's), as ``make docs`` runs it."""
    env_cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)]
    return subprocess.run(env_cmd, cwd=config.parent, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def _nav_pages(nav) -> list[str]:
    """Every page file named in a mkdocs nav (nested lists of {title: page-or-list})."""
    out: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return out


def test_the_docs_site_builds_strict(tmp_path):
    done = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "restore" / "index.html").is_file()
    assert (tmp_path / "site" / "faults" / "index.html").is_file()


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """The validation settings of mkdocs.yml turn a link to a missing page, or to a missing heading, into a
    failure: the same settings over two pages, one link broken at a time."""
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert cfg["strict"] is True
    cfg.update(docs_dir="docs", nav=[{"Home": "index.md"}, {"Other": "other.md"}])
    cfg.pop("theme", None)  # the default theme: the check is mkdocs's, not Material's
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(cfg))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "other.md").write_text("# Other\n\n## A heading\n")
    for target, ok in (("other.md#a-heading", True), ("missing.md", False), ("other.md#no-such-heading", False)):
        (docs / "index.md").write_text(f"# Home\n\n[a link]({target})\n")
        done = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
        assert (done.returncode == 0) is ok, (target, done.stdout + done.stderr)


def test_every_docs_page_is_in_the_nav():
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = set(_nav_pages(cfg["nav"]))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_every_relative_link_in_the_readme_resolves():
    text = (ROOT / "README.md").read_text()
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert len(targets) >= 10  # the README links into the docs: the check is not vacuous
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == [], f"README.md links to missing files: {missing}"
    # an anchor into a Markdown file names one of its headings (slugs as the site's toc and GitHub make them)
    from markdown.extensions.toc import slugify

    for t in targets:
        page, _, anchor = t.partition("#")
        if anchor and page.endswith(".md"):
            heads = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(), re.M)
            slugs = {slugify(h.replace("`", ""), "-") for h in heads}
            assert anchor in slugs, f"README.md links to {t}: no such heading in {page}"


def test_the_readme_links_to_docs_pages_by_relative_path():
    """Links into the docs site are relative paths (docs/restore.md), so they work on GitHub too; each names a page
    the site builds."""
    text = (ROOT / "README.md").read_text()
    docs_links = {t.split("#", 1)[0] for t in LINK.findall(text) if t.startswith("docs/")}
    for page in ("docs/restore.md", "docs/configuration.md", "docs/faults.md", "docs/cluster.md", "docs/design.md"):
        assert page in docs_links, page
