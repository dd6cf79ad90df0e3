"""docs/alert-rules.yml is valid for Prometheus and behaves as docs/alert-rules.test.yml says.

Needs no stack: promtool (Debian's prometheus package, the binary only: scripts/test-tools.sh
puts it in .state/tools) checks the rules and runs their unit tests, among them a responder
target that is down and one that is absent, each firing its alert, and nginx-made 503/504
told apart from the responders' own. Every alert has at least one test in which it fires.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES = REPO_ROOT / "docs/alert-rules.yml"
RULE_TESTS = REPO_ROOT / "docs/alert-rules.test.yml"


def tool(name: str) -> str:
    """A binary of scripts/test-tools.sh (TODOSYNC_TEST_TOOLS, else .state/tools), else PATH."""
    candidate = Path(os.environ.get("TODOSYNC_TEST_TOOLS") or REPO_ROOT / ".state/tools") / name
    if os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: run scripts/test-tools.sh (scripts/test.sh does)")
    return found


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


def test_promtool_checks_the_rules():
    r = run(tool("promtool"), "check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout, r.stdout


def test_promtool_unit_tests_of_the_rules_pass():
    r = run(tool("promtool"), "test", "rules", str(RULE_TESTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout, r.stdout


def test_every_alert_has_a_test_in_which_it_fires():
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"]
              for rule in group["rules"] if "alert" in rule}
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == ["alert-rules.yml"]
    fired = {case["alertname"] for test in tests["tests"] for case in test.get("alert_rule_test", [])
             if case.get("exp_alerts")}
    assert alerts - fired == set(), f"alerts no test in {RULE_TESTS.name} fires: {sorted(alerts - fired)}"
    assert fired - alerts == set(), f"tests of alerts that do not exist: {sorted(fired - alerts)}"
    for name in ("TodoSyncResponderDown", "TodoSyncRespondersAbsent", "TodoSyncNginxUpstreamErrors"):
        assert name in alerts, name


def test_the_documented_scrape_config_is_valid_and_has_the_rules_jobs(tmp_path):
    """docs/OPERATIONS.md's scrape config names the jobs the rules read, and Prometheus takes it."""
    text = (REPO_ROOT / "docs/OPERATIONS.md").read_text()
    block = re.search(r"```yaml\n(scrape_configs:.*?)```", text, re.S)
    assert block, "no scrape_configs block in docs/OPERATIONS.md"
    config = yaml.safe_load(block.group(1))
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    ruled = set(re.findall(r'job="([^"]+)"', RULES.read_text()))
    assert ruled and ruled <= jobs, (ruled, jobs)
    instances = [target["labels"]["instance"] for job in config["scrape_configs"] if job["job_name"] == "todosync"
                 for target in job["static_configs"]]
    assert len(instances) == len(set(instances)) >= 2, "one target per responder, each its own instance"
    path = tmp_path / "prometheus.yml"
    path.write_text(block.group(1) + f"rule_files: [{RULES}]\n")
    r = run(tool("promtool"), "check", "config", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
