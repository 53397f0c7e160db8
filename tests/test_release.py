"""One version everywhere (tools/release.py): the sources agree, tampering is caught, and
`make release` makes a consistent tagged commit or refuses."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import release  # noqa: E402

FILES = ["mathref/__init__.py", "_config.yml", "CHANGELOG.md"]


def test_this_checkout_is_consistent():
    assert release.problems() == []


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def course(tmp_path):
    """A repository holding this checkout's versioned files (committed, clean)."""
    root = tmp_path / "course"
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    (root / "notebooks").mkdir()
    for path in release.notebooks():
        nb = json.loads(path.read_text())
        nb["cells"] = nb["cells"][:2]  # the setup cell is all that the release touches
        (root / "notebooks" / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    git(root.parent, "init", "--quiet", "-b", "main", str(root))
    git(root, "config", "user.name", "t")
    git(root, "config", "user.email", "t@t")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "course")
    assert release.problems(root) == []
    return root


def tamper_setup_cell(root, name, ref):
    path = root / "notebooks" / name
    nb = json.loads(path.read_text())
    cell = release.setup_cell(nb)
    cell["source"] = [line.replace('COURSE_REF = "', f'COURSE_REF = "{ref}" or "') for line in cell["source"]]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def test_one_tampered_setup_cell_is_named(course):
    name = release.notebooks(course)[6].name
    tamper_setup_cell(course, name, "v9.9.9")
    found = release.problems(course)
    assert len(found) == 1 and found[0].startswith(name) and "'v9.9.9'" in found[0]


@pytest.mark.parametrize("edit, expected", [
    (("_config.yml", "  branch: main", "  branch: v0.1.0"), "repository.branch"),
    (("mathref/__init__.py", '.dev0"', '"'), "needs"),  # a release version on main
    (("CHANGELOG.md", "## Unreleased", "## 0.1.0 (2026-01-01)"), "CHANGELOG.md"),
])
def test_package_config_and_changelog_disagreements_are_caught(course, edit, expected):
    name, old, new = edit
    path = course / name
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    assert any(expected in line for line in release.problems(course))


def test_release_makes_a_consistent_tag_and_returns_to_development(course, monkeypatch):
    monkeypatch.setenv("RELEASE_TEST_COMMAND", "true")
    before = release.package_version(course)
    release.release("0.2.0", root=course)
    # the tagged commit: every source says v0.2.0
    tagged = course.parent / "tagged"
    git(course.parent, "clone", "--quiet", "--branch", "v0.2.0", str(course), str(tagged))
    assert git(course, "cat-file", "-t", "v0.2.0") == "tag"  # annotated
    assert release.package_version(tagged) == "0.2.0"
    assert release.problems(tagged) == []
    assert {release.setup_values(p)["COURSE_REF"] for p in release.notebooks(tagged)} == {"v0.2.0"}
    assert "branch: v0.2.0" in (tagged / "_config.yml").read_text()
    assert release.changelog_sections(tagged)[0].startswith("0.2.0 (")
    # main: development again, consistent, newer than the release
    assert release.package_version(course) == "0.2.1.dev0" != before
    assert release.problems(course) == [] and git(course, "status", "--porcelain") == ""
    assert release.changelog_sections(course)[:2] == ["Unreleased", release.changelog_sections(tagged)[0]]


def test_release_refuses_a_red_test_a_dirty_tree_and_an_old_version(course, monkeypatch):
    head = git(course, "rev-parse", "HEAD")
    monkeypatch.setenv("RELEASE_TEST_COMMAND", "false")
    with pytest.raises(SystemExit, match="failed"):
        release.release("0.2.0", root=course)
    monkeypatch.setenv("RELEASE_TEST_COMMAND", "true")
    with pytest.raises(SystemExit, match="not newer"):
        release.release("0.0.9", root=course)
    (course / "notes.txt").write_text("uncommitted")
    with pytest.raises(SystemExit, match="not clean"):
        release.release("0.2.0", root=course)
    assert git(course, "rev-parse", "HEAD") == head and git(course, "tag", "--list") == ""


def test_the_canary_refuses_a_ref_that_does_not_exist(tmp_path, monkeypatch):
    import canary

    with pytest.raises(SystemExit, match="does not exist"):
        canary.mirror_with_ref("v99.0.0", tmp_path)
    mirror = canary.mirror_with_ref("HEAD", tmp_path / "ok")
    assert (mirror / "HEAD").exists()


def test_the_canary_names_a_crash_of_the_unit_tests(tmp_path, capsys):
    # the CI run of bad38d9: the floor's pytest died with no summary line, and the log showed
    # only a line of dots; now the signal and the faulthandler's lines on stderr are shown
    import canary

    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\necho ....\necho 'Fatal Python error: Segmentation fault' >&2\n"
                      "echo '  File \"tests/test_x.py\", line 3 in test_y' >&2\nkill -SEGV $$\n")
    python.chmod(0o755)
    line, rc = canary.run_unit(tmp_path, jobs=1, quick=True)
    assert rc != 0 and line.startswith("✗") and "killed by signal 11" in line, line
    log = capsys.readouterr().out
    assert "stderr: Fatal Python error: Segmentation fault" in log, log
    assert 'tests/test_x.py", line 3 in test_y' in log, log
