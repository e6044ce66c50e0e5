"""The import-linter contracts run in `make test`; this checks that they really bite."""

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def run_lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache"], cwd=tree, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})


def test_the_contracts_hold_for_the_real_tree_and_catch_violations(tmp_path):
    assert run_lint(ROOT).returncode == 0
    tree = tmp_path / "tree"
    for package in ("app", "widgets", "local_models", "sync", "resources"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    with (tree / "app" / "core" / "services" / "stats.py").open("a") as handle:
        handle.write("\nfrom PySide6 import QtCore  # noqa\nimport sync.client  # noqa\n"
                     "import app.core.next_round.leaderboard_report  # noqa\n")
    with (tree / "app" / "core" / "next_round" / "comparison.py").open("a") as handle:
        handle.write("\n\ndef _page():\n    from app.core.next_round import comparison_report  # noqa\n")
    with (tree / "widgets" / "filter_bar.py").open("a") as handle:
        handle.write("\nimport sqlalchemy  # noqa\nfrom app.core.services import review  # noqa\n")
    with (tree / "sync" / "transport.py").open("a") as handle:
        handle.write("\nimport uvicorn  # noqa\n")
    result = run_lint(tree)
    assert result.returncode != 0
    assert "sync.transport -> uvicorn" in result.stdout  # the desk runs without the server extra
    assert "app.core.services.stats -> PySide6" in result.stdout
    assert "widgets.filter_bar -> sqlalchemy" in result.stdout
    assert "app.core is not allowed to import sync" in result.stdout  # the layers: an arrow back up
    assert "widgets.filter_bar -> app.core.services.review" in result.stdout  # widgets take view-models only
    assert "app.core.services.stats -> app.core.next_round.leaderboard_report" in result.stdout  # built on services
    assert "No cycles are allowed in app.core.next_round" in result.stdout  # even a lazy import back
