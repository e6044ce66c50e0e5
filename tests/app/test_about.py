"""The version information behind `dynadesk --version` and Help > About."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from app import __version__
from app.cli import cli
from app.core import about


def test_version_info_names_every_part():
    info = about.version_info()
    assert info["version"] == __version__
    assert info["revision"]
    assert re.match(r"\d+\.\d+", info["torch"]) and re.match(r"\d+\.\d+", info["onnxruntime"])
    assert re.match(r"6\.\d+", info["qt"])
    expected = hashlib.sha256(about.default_model_file().read_bytes()).hexdigest()
    assert info["default_model_sha256"] == expected


def test_the_build_revision_wins_over_git(tmp_path, monkeypatch):
    built = tmp_path / "build_info.json"
    built.write_text(json.dumps({"revision": "abc123def456", "built": "2026-01-01 00:00 UTC"}))
    monkeypatch.setattr(about, "BUILD_INFO_FILE", built)
    info = about.version_info()
    assert info["revision"] == "abc123def456"
    assert "abc123def456 (built 2026-01-01 00:00 UTC)" in about.version_text(info)


def test_without_build_info_or_git_the_revision_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(about, "BUILD_INFO_FILE", tmp_path / "missing.json")
    assert about.git_revision(tmp_path) == "unknown"


def test_cli_version_prints_everything():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    info = about.version_info()
    for part in (f"dynadesk {__version__}", info["revision"], f"torch {info['torch']}",
                 f"onnxruntime {info['onnxruntime']}", f"Qt (PySide6) {info['qt']}", info["default_model_sha256"]):
        assert part in result.output


def test_cli_version_imports_no_runtime():
    code = ("import sys; from app.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'onnxruntime', 'PySide6', 'transformers') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "HEAVY []" in out
    assert f"dynadesk {__version__}" in out


@pytest.mark.usefixtures("qapp")
def test_about_dialog_shows_the_version_info(tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from app.core.desk import Desk
    from app.gui.main_window import MainWindow

    shown = []
    monkeypatch.setattr(QMessageBox, "about", staticmethod(lambda parent, title, text: shown.append((title, text))))
    with Desk(tmp_path / "data") as desk:
        window = MainWindow(desk)
        try:
            window.show_about()
        finally:
            window.close()
    info = about.version_info()
    (title, text), = shown
    assert title == "About Dynadesk"
    for part in (__version__, info["revision"], info["torch"], info["onnxruntime"], info["qt"],
                 info["default_model_sha256"], info["default_model_int8"]):
        assert part in text


def test_about_names_the_default_models_int8_check(monkeypatch, tmp_path):
    """The figures shipped with the bundled model's int8 recipe; a missing recipe says the desk runs fp32."""
    info = about.version_info()
    assert "int8 parity passed: same label on " in info["default_model_int8"]
    assert "dev + test split" in info["default_model_int8"]
    assert f"default model int8: {info['default_model_int8']}" in about.version_text(info)

    import resources

    monkeypatch.setattr(resources, "ROOT", tmp_path)
    assert about.default_model_int8() == "no int8 recipe shipped (the desk runs fp32)"
