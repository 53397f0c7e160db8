"""One version everywhere: the consistency check and `make release VERSION=x.y.z`.

The invariant: the notebook a learner opens and the mathref its first cell installs come from
the same place. A release commit (tagged vX.Y.Z) has

    mathref.__version__ == "X.Y.Z", every setup cell COURSE_REF = "vX.Y.Z",
    _config.yml repository.branch == "vX.Y.Z" (the book's Colab buttons open the tag's notebooks),
    CHANGELOG.md's first section "## X.Y.Z (YYYY-MM-DD)";

every commit between releases has

    mathref.__version__ == "X.Y.Z.devN" (newer than the last release), COURSE_REF = "main",
    repository.branch == "main", CHANGELOG.md's first section "## Unreleased";

and every setup cell's COURSE_REPO is _config.yml's repository.url.

    python tools/release.py check            # exit 1 and the disagreements, or "consistent"
    python tools/release.py 0.2.0            # what `make release VERSION=0.2.0` runs

A release refuses on a dirty tree, an existing tag, a version not newer than the current one,
or a failing test command (`make test`; $RELEASE_TEST_COMMAND replaces it in the release's own
test). It then makes two commits: "Release vX.Y.Z" (annotated tag vX.Y.Z) and the return to
development (X.Y.(Z+1).dev0, COURSE_REF "main"). Pushing the tag publishes the book
(.github/workflows/pages.yml).
"""
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
VERSION_FILE = "mathref/__init__.py"
VERSION_RE = re.compile(r'^__version__ = "([^"]+)"$', re.M)
RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")
DEV_RE = re.compile(r"^(\d+\.\d+\.\d+)\.dev\d+$")
# the setup cell prints describe_environment(): "mathref X | torch ... | device: ..."
ENV_LINE = re.compile(r"^mathref (\S+) \|", re.M)
SETUP_LINE = {name: re.compile(rf'^{name} = "([^"]*)"', re.M) for name in ("COURSE_REPO", "COURSE_REF")}
HEADING_RE = re.compile(r"^## (.+)$", re.M)
RELEASED_RE = re.compile(r"^(\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$")


def as_tuple(version):
    return tuple(int(p) for p in version.split("."))


def package_version(root=ROOT):
    match = VERSION_RE.search((root / VERSION_FILE).read_text())
    if not match:
        raise SystemExit(f"no __version__ line in {VERSION_FILE}")
    return match.group(1)


def notebooks(root=ROOT):
    return sorted((root / "notebooks").glob("*.ipynb"))


def setup_cell(nb):
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def stored_text(cell):
    return "".join("".join(out.get("text", "")) for out in cell.get("outputs", []))


def setup_values(path):
    """COURSE_REPO and COURSE_REF as the notebook's first code cell sets them, and the mathref
    version its stored output printed (None where absent)."""
    cell = setup_cell(json.loads(path.read_text()))
    source = "".join(cell["source"])
    values = {name: (m.group(1) if (m := rx.search(source)) and len(rx.findall(source)) == 1 else None)
              for name, rx in SETUP_LINE.items()}
    printed = ENV_LINE.search(stored_text(cell))
    values["printed"] = printed.group(1) if printed else None
    return values


def changelog_sections(root=ROOT):
    """The changelog's "## ..." headings, newest first."""
    path = root / "CHANGELOG.md"
    return HEADING_RE.findall(path.read_text()) if path.exists() else []


def expected_ref(version):
    if RELEASE_RE.match(version):
        return f"v{version}"
    if DEV_RE.match(version):
        return "main"
    return None


def problems(root=ROOT):
    """Every way the package, the notebooks, _config.yml and the changelog disagree."""
    found = []
    version = package_version(root)
    ref = expected_ref(version)
    if ref is None:
        return [f"{VERSION_FILE}: version {version!r} is neither X.Y.Z (a release) nor X.Y.Z.devN"]
    repository = yaml.safe_load((root / "_config.yml").read_text())["repository"]
    if repository.get("branch") != ref:
        found.append(f"_config.yml: repository.branch is {repository.get('branch')!r}, "
                     f"version {version} needs {ref!r}")
    for path in notebooks(root):
        values = setup_values(path)
        if values["COURSE_REF"] != ref:
            found.append(f"{path.name}: setup cell COURSE_REF is {values['COURSE_REF']!r}, "
                         f"version {version} needs {ref!r}")
        if values["printed"] != version:
            found.append(f"{path.name}: the setup cell's stored output says mathref "
                         f"{values['printed']}, the package is {version}")
        if values["COURSE_REPO"] != repository.get("url"):
            found.append(f"{path.name}: setup cell COURSE_REPO is {values['COURSE_REPO']!r}, "
                         f"_config.yml's repository.url is {repository.get('url')!r}")
    sections = changelog_sections(root)
    released = [RELEASED_RE.match(s).group(1) for s in sections if RELEASED_RE.match(s)]
    if not sections:
        found.append("CHANGELOG.md: missing, or without a '## ' section")
    elif ref == "main":
        if sections[0] != "Unreleased":
            found.append(f"CHANGELOG.md: first section is {sections[0]!r}; between releases it "
                         "is '## Unreleased'")
        base = DEV_RE.match(version).group(1)
        if released and as_tuple(released[0]) >= as_tuple(base):
            found.append(f"{VERSION_FILE}: development version {version} is not newer than the "
                         f"last release {released[0]}")
    elif not (RELEASED_RE.match(sections[0]) and RELEASED_RE.match(sections[0]).group(1) == version):
        found.append(f"CHANGELOG.md: first section is {sections[0]!r}; release {version} needs "
                     f"'## {version} (YYYY-MM-DD)'")
    return found


# ---- writing a version into the sources -----------------------------------------------------

def write_notebook(path, nb):
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def set_version(root, version):
    """Package version, every setup cell's COURSE_REF and the config's branch, for `version`."""
    ref = expected_ref(version)
    path = root / VERSION_FILE
    path.write_text(VERSION_RE.sub(f'__version__ = "{version}"', path.read_text(), count=1))
    for nb_path in notebooks(root):
        nb = json.loads(nb_path.read_text())
        cell = setup_cell(nb)
        source = SETUP_LINE["COURSE_REF"].sub(f'COURSE_REF = "{ref}"', "".join(cell["source"]), count=1)
        cell["source"] = source.splitlines(keepends=True)
        for out in cell.get("outputs", []):  # what describe_environment() prints
            if "text" in out:
                text = ENV_LINE.sub(f"mathref {version} |", "".join(out["text"]))
                out["text"] = text.splitlines(keepends=True)
        write_notebook(nb_path, nb)
    config = root / "_config.yml"
    text, n = re.subn(r"^(  branch: )\S+", rf"\g<1>{ref}", config.read_text(), count=1, flags=re.M)
    if n != 1:
        raise SystemExit("_config.yml: no 'repository: branch:' line to set")
    config.write_text(text)


def changelog_release(root, version, date):
    """'## Unreleased' becomes '## X.Y.Z (date)' (it must say something)."""
    path = root / "CHANGELOG.md"
    text = path.read_text()
    match = re.search(r"^## Unreleased\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not match or not match.group(1).strip():
        raise SystemExit("CHANGELOG.md: write what the release changes under '## Unreleased' first")
    path.write_text(text[:match.start()] + f"## {version} ({date})\n" + text[match.start() + len("## Unreleased\n"):])


def changelog_unreleased(root):
    path = root / "CHANGELOG.md"
    text = path.read_text()
    first = HEADING_RE.search(text)
    path.write_text(text[:first.start()] + "## Unreleased\n\n" + text[first.start():])


def git(root, *args, capture=True):
    return subprocess.run(["git", *args], cwd=root, check=True, text=True,
                          capture_output=capture).stdout.strip()


def release(version, root=ROOT):
    if not RELEASE_RE.match(version):
        raise SystemExit(f"VERSION must be X.Y.Z, got {version!r}")
    current = package_version(root)
    base = DEV_RE.match(current).group(1) if DEV_RE.match(current) else current
    if as_tuple(version) < as_tuple(base) or (RELEASE_RE.match(current) and version == current):
        raise SystemExit(f"refusing: {version} is not newer than the current version {current}")
    tag = f"v{version}"
    if git(root, "tag", "--list", tag):
        raise SystemExit(f"refusing: tag {tag} exists")
    dirty = git(root, "status", "--porcelain")
    if dirty:
        raise SystemExit(f"refusing: the working tree is not clean (commit or remove first):\n{dirty}")
    if found := problems(root):
        raise SystemExit("refusing: the sources disagree before the release:\n  " + "\n  ".join(found))
    command = os.environ.get("RELEASE_TEST_COMMAND", "make test")
    print(f"release {tag}: running `{command}` first", flush=True)
    if subprocess.run(command, shell=True, cwd=root).returncode != 0:
        raise SystemExit(f"refusing: `{command}` failed; nothing was changed")
    if git(root, "status", "--porcelain"):
        raise SystemExit(f"refusing: `{command}` left the tree dirty; nothing was committed")

    date = datetime.date.today().isoformat()
    set_version(root, version)
    changelog_release(root, version, date)
    if found := problems(root):
        raise SystemExit("release: the release commit would be inconsistent:\n  " + "\n  ".join(found))
    git(root, "commit", "--quiet", "-am", f"Release {tag}")
    git(root, "tag", "-a", tag, "-m", f"From x² to GPT {tag} ({date})")

    major, minor, patch = as_tuple(version)
    set_version(root, f"{major}.{minor}.{patch + 1}.dev0")
    changelog_unreleased(root)
    if found := problems(root):
        raise SystemExit("release: the development commit would be inconsistent:\n  " + "\n  ".join(found))
    git(root, "commit", "--quiet", "-am", f"Back to development after {tag}")
    print(f"release {tag}: tagged {git(root, 'rev-parse', '--short', tag + '^{commit}')}; "
          f"main is at {major}.{minor}.{patch + 1}.dev0. Publish with: git push origin main {tag}")


def main(argv):
    if argv == ["check"]:
        found = problems()
        # in the workflow that publishes a tag: the tag is the release the sources name
        if os.environ.get("GITHUB_REF_TYPE") == "tag":
            tag, ref = os.environ.get("GITHUB_REF_NAME"), expected_ref(package_version())
            if tag != ref:
                found.append(f"the pushed tag is {tag!r}, the sources are release {ref!r}")
        for line in found:
            print(line)
        print(f"release check: {'INCONSISTENT' if found else 'consistent'} "
              f"(mathref {package_version()}, setup cells, _config.yml, CHANGELOG.md)")
        return int(bool(found))
    if len(argv) == 1:
        release(argv[0])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
