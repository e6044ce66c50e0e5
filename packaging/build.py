"""`make package`: write build/build_info.json, run PyInstaller, assemble the tarball.

    python packaging/build.py            # dist/dynadesk/ and dist/dynadesk-<version>-linux-x86_64.tar.gz
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import __version__  # noqa: E402
from app.core.about import git_revision  # noqa: E402

BUILD, DIST = ROOT / "build", ROOT / "dist"
NAME = f"dynadesk-{__version__}-linux-x86_64"


def torch_pin() -> str:
    """The torch release pyproject.toml pins (its one place), such as "X.Y.Z"."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        dependencies = tomllib.load(handle)["project"]["dependencies"]
    pins = [d.split("==", 1)[1].strip() for d in dependencies if d.replace(" ", "").startswith("torch==")]
    if len(pins) != 1:
        raise SystemExit("pyproject.toml must pin torch exactly once (torch==X.Y.Z)")
    return pins[0]


def check_torch() -> None:
    """The bundle ships the pinned CPU build: another release, or a CUDA build (gigabytes), is refused."""
    import torch

    release = torch.__version__.split("+", 1)[0]
    if release != torch_pin() or torch.version.cuda is not None:
        raise SystemExit(f"make package bundles torch {torch_pin()} (CPU); this environment has {torch.__version__}"
                         f"{' with CUDA ' + torch.version.cuda if torch.version.cuda else ''}: run make clean-venv, "
                         "then make package")


def main() -> int:
    check_torch()
    started = time.perf_counter()
    BUILD.mkdir(exist_ok=True)
    info = {"version": __version__, "revision": git_revision(ROOT),
            "built": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    (BUILD / "build_info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
                    "--distpath", str(DIST), "--workpath", str(BUILD / "pyinstaller"),
                    str(ROOT / "packaging" / "dynadesk.spec")], check=True, cwd=ROOT)
    bundle = DIST / "dynadesk"
    built_s = time.perf_counter() - started

    stage = BUILD / NAME
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for name in ("install.sh", "dynadesk.desktop", "dynadesk.svg"):
        shutil.copy2(ROOT / "packaging" / name, stage / name)
    (stage / "install.sh").chmod(0o755)
    tarball = DIST / f"{NAME}.tar.gz"
    with tarfile.open(tarball, "w:gz", compresslevel=6) as tar:
        tar.add(stage, arcname=NAME)
        tar.add(bundle, arcname=f"{NAME}/dynadesk")
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file() and not f.is_symlink())
    print(json.dumps({"bundle": str(bundle), "bundle_mb": round(size / 2**20, 1), "tarball": str(tarball),
                      "tarball_mb": round(tarball.stat().st_size / 2**20, 1), "pyinstaller_s": round(built_s, 1),
                      "total_s": round(time.perf_counter() - started, 1), **info}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
