"""The installer, menu entry and icon that ship in the tarball, and the bundle's own check run from
source (the bundle itself is built by `make package` and checked by `make package-check`, never in
`make test`)."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

PACKAGING = Path(__file__).resolve().parent.parent / "packaging"


def _stage_release(tmp_path: Path) -> Path:
    """A release folder as the tarball unpacks, with a stand-in executable for the bundle."""
    release = tmp_path / "dynadesk-0.0.0-linux-x86_64"
    (release / "dynadesk").mkdir(parents=True)
    executable = release / "dynadesk" / "dynadesk"
    executable.write_text("#!/bin/sh\necho bundled dynadesk \"$@\"\n")
    executable.chmod(0o755)
    for name in ("install.sh", "dynadesk.desktop", "dynadesk.svg"):
        (release / name).write_bytes((PACKAGING / name).read_bytes())
    (release / "install.sh").chmod(0o755)
    return release


def _run_installer(release: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PREFIX": str(home / ".local")}
    return subprocess.run([str(release / "install.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=60, check=True)


def test_install_sh_puts_the_launcher_menu_entry_and_icon_in_place_and_removes_them(tmp_path):
    release, home = _stage_release(tmp_path), tmp_path / "home"
    home.mkdir()
    _run_installer(release, home)
    local = home / ".local"
    launcher = local / "bin" / "dynadesk"
    assert subprocess.run([str(launcher), "--version"], capture_output=True, text=True,
                          check=True).stdout.strip() == "bundled dynadesk --version"
    entry = configparser.ConfigParser(interpolation=None)
    entry.read(local / "share" / "applications" / "dynadesk.desktop")
    desktop = entry["Desktop Entry"]
    assert desktop["Exec"] == str(launcher) and desktop["TryExec"] == str(launcher)
    assert desktop["Icon"] == "dynadesk" and desktop["Type"] == "Application"
    assert (local / "share" / "icons" / "hicolor" / "scalable" / "apps" / "dynadesk.svg").is_file()

    (home / "data").mkdir()  # the user's work is never the installer's to remove
    _run_installer(release, home)  # installing again upgrades in place
    _run_installer(release, home, "--uninstall")
    assert not launcher.exists() and not (local / "share" / "dynadesk").exists()
    assert not (local / "share" / "applications" / "dynadesk.desktop").exists()
    assert (home / "data").is_dir()


def test_install_sh_refuses_a_release_without_its_bundle(tmp_path):
    release = _stage_release(tmp_path)
    (release / "dynadesk" / "dynadesk").unlink()
    result = subprocess.run([str(release / "install.sh")], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "no bundle" in result.stderr


def test_the_icon_is_valid_svg_and_draws(qapp):
    ElementTree.parse(PACKAGING / "dynadesk.svg")
    renderer = QSvgRenderer(str(PACKAGING / "dynadesk.svg"))
    assert renderer.isValid()
    image = QImage(64, 64, QImage.Format.Format_ARGB32)
    image.fill(0)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    opaque = sum(image.pixelColor(x, y).alpha() > 0 for x in range(64) for y in range(64))
    assert opaque > 64 * 64 // 2


def test_the_menu_entry_runs_the_app_without_file_arguments():
    entry = configparser.ConfigParser(interpolation=None)
    entry.read(PACKAGING / "dynadesk.desktop")
    assert entry["Desktop Entry"]["Exec"] == "dynadesk"  # the CLI takes no files; %F would break it
    assert os.access(PACKAGING / "install.sh", os.X_OK)


OPEN_EVERY_TAB = """
import json, sys, time
for name in json.loads(sys.argv[2]):  # as in the bundle: importing these fails, find_spec says absent
    sys.modules.setdefault(name, None)
errors = []
def record(kind, value, tb):  # errors inside slots, and at the top
    errors.append(f"{kind.__name__}: {value}")
    sys.__excepthook__(kind, value, tb)
sys.excepthook = record
from PySide6.QtWidgets import QApplication
from app.core.desk import Desk
from app.gui.main_window import MainWindow
import app.cli, app.core.services.evaluation_report  # the CLI (with eval) and the report, imported lazily in the app
app = QApplication([])
window = MainWindow(Desk(sys.argv[1]))
window.show()
for index in range(window.tabs.count()):
    window.tabs.setCurrentIndex(index)
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        app.processEvents()
window.close()
print(json.dumps({"tabs": window.tabs.count(), "errors": errors}))
"""


def _bundle_excludes() -> list[str]:
    import ast

    tree = ast.parse((PACKAGING / "dynadesk.spec").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "excludes":
            return ast.literal_eval(node.value)
    raise AssertionError("dynadesk.spec has no excludes list")


def test_the_app_works_without_the_modules_the_bundle_leaves_out(tmp_path):
    """A module the spec excludes but the app needs breaks only the installed bundle (pyqtgraph's
    curves needed QtOpenGL once). Here those modules are made unimportable, as in the bundle, and
    every tab is opened, without building the bundle."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run([sys.executable, "-c", OPEN_EVERY_TAB, str(tmp_path / "data"), json.dumps(_bundle_excludes())],
                            env=env, capture_output=True, text=True, timeout=300, cwd=PACKAGING.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"tabs": 7, "errors": []}  # Create, Data, Validate, Review, Dashboard, Evaluate, Suite


SMOKE_AS_BUNDLED = """
import json, sys
for name in json.loads(sys.argv[1]):  # as in the bundle: the modules its spec leaves out are absent
    sys.modules.setdefault(name, None)
from app.cli import main
main(sys.argv[2:])
"""


def test_the_package_check_smoke_runs_twice_on_one_data_folder_through_the_near_duplicate_warning(
        data_dir, default_model_cache, tmp_path):
    """`make package-check`'s two smoke runs, from source (the bundle takes minutes to build): the
    second types the same text on the same data folder, so it meets the near-duplicate warning and
    stores the example through "Submit anyway", where it once waited for the metadata form in vain."""
    from app.core import paths
    from app.core.desk import Desk

    shutil.copytree(default_model_cache, paths.models_cache_dir(data_dir))  # prepared once per test run
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "DYNADESK_DATA_DIR": str(data_dir)}
    runs = []
    for run in ("first", "second"):
        result = subprocess.run([sys.executable, "-c", SMOKE_AS_BUNDLED, json.dumps(_bundle_excludes()), "smoke-test",
                                 "--screenshot", str(tmp_path / f"{run}.png"), "--timeout", "240"],
                                env=env, capture_output=True, text=True, timeout=300, cwd=PACKAGING.parent)
        assert result.returncode == 0, f"{run} run: {result.stderr[-3000:]}"
        runs.append(json.loads(result.stdout))
        assert (tmp_path / f"{run}.png").is_file()
    first, second = runs
    assert (first["near_duplicate_warning"], first["examples_with_this_text"]) == (False, 1)
    assert (second["near_duplicate_warning"], second["examples_with_this_text"]) == (True, 2)
    with Desk(data_dir) as desk:  # a hand count: both stored, nothing lost to the warning
        stored = [desk.examples.get(uuid.UUID(run["example"]["id"])) for run in runs]
    assert [(e.text, e.status) for e in stored] == [("Have a lovely weekend, everyone!", "submitted")] * 2
    assert stored[0].id != stored[1].id


SERVE_AS_BUNDLED = """
import json, sys
from click.testing import CliRunner
for name in json.loads(sys.argv[1]):  # as in the bundle: the server's web stack is absent
    sys.modules.setdefault(name, None)
from app.cli import cli
runs = {}
for key, args in (("run", ["serve", "run", "--port", "0"]),
                  ("add", ["serve", "add-person", "Olga", "--role", "owner"]),
                  ("postgres", ["serve", "people", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none"])):
    result = CliRunner().invoke(cli, ["--data-dir", sys.argv[2], *args])
    runs[key] = {"code": result.exit_code, "out": result.output, "error": repr(result.exception)}
print(json.dumps(runs))
"""


def test_the_desk_without_the_server_extra_says_how_to_get_the_server(tmp_path):
    """The bundle leaves the sync server's web stack out (the `server` extra): `dynadesk serve run`
    then says what to install instead of failing on an import, while the server's admin commands
    still work on a SQLite server file."""
    excluded = _bundle_excludes()
    assert {"fastapi", "starlette", "uvicorn", "psycopg"} <= set(excluded)
    result = subprocess.run([sys.executable, "-c", SERVE_AS_BUNDLED, json.dumps(excluded), str(tmp_path / "data")],
                            capture_output=True, text=True, timeout=300, cwd=PACKAGING.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("run", "postgres"):
        assert runs[key]["code"] != 0 and "DynadeskError" in runs[key]["error"], runs[key]
        assert "dynadesk[server]" in runs[key]["error"], runs[key]
    assert "uvicorn is not installed" in runs["run"]["error"]
    assert runs["add"]["code"] == 0 and runs["add"]["out"].splitlines()[-1].startswith("ddk_"), runs["add"]


FUSE_AS_BUNDLED = """
import json, sys
from pathlib import Path
for name in json.loads(sys.argv[1]):  # as in the bundle: the modules its spec leaves out are absent
    sys.modules.setdefault(name, None)
from local_models.engine import load_engine
from local_models.fused_graph import export_fused_graph
engine = load_engine(sys.argv[2])
print(json.dumps(export_fused_graph(engine, Path(sys.argv[3])).counts))
"""


def test_the_fused_export_works_without_the_modules_the_bundle_leaves_out(trigger_model_dir, tmp_path):
    """Every desk's first start exports the fused graph (the default model's int8 recipe quantizes it): the
    TorchScript exporter and ONNX Runtime's transformer fuser must work with what the bundle keeps."""
    result = subprocess.run([sys.executable, "-c", FUSE_AS_BUNDLED, json.dumps(_bundle_excludes()),
                             str(trigger_model_dir), str(tmp_path / "fused.onnx")],
                            capture_output=True, text=True, timeout=300, cwd=PACKAGING.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    assert counts.get("Attention") and counts.get("SkipLayerNormalization")
