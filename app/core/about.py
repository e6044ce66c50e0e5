"""What ``dynadesk --version`` and Help > About say: the version, the git revision, the versions
of the runtimes and the default model's checksum.

Qt-free and fast: versions are read from package metadata (nothing heavy is imported), and the
revision comes from the build (``app/build_info.json``, written into the bundle by
``make package``), else from ``git`` when running from a checkout, else "unknown".

    info = version_info()
    print(version_text(info))
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from app import __version__
from app.core.int8_status import default_model_int8

BUILD_INFO_FILE = Path(__file__).resolve().with_name("build_info.json")
UNKNOWN = "unknown"

# distribution names to try, first match wins (PySide6 may come as PySide6 or PySide6-Essentials)
_DISTRIBUTIONS = {
    "torch": ("torch",),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu"),
    "qt": ("PySide6", "PySide6-Essentials", "PySide6_Essentials"),
}


def build_info() -> dict[str, Any]:
    """What the build wrote into the bundle; empty when running from source."""
    try:
        data = json.loads(BUILD_INFO_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def git_revision(root: Path | None = None) -> str:
    """The checkout's revision (short hash, "+dirty" with uncommitted changes), or "unknown"."""
    root = Path(root) if root else Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return UNKNOWN
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return f"{head}+dirty" if head and dirty else (head or UNKNOWN)


def package_version(key: str) -> str:
    """A runtime's version from its package metadata, without importing it."""
    for name in _DISTRIBUTIONS.get(key, (key,)):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    module = sys.modules.get({"qt": "PySide6"}.get(key, key))  # already imported: ask the module itself
    return str(getattr(module, "__version__", UNKNOWN)) if module else UNKNOWN


def default_model_file() -> Path:
    import resources

    return resources.ROOT / "models" / "hate_speech_r1" / "trained_part.safetensors"


@functools.lru_cache(maxsize=1)
def default_model_sha256() -> str:
    """sha256 of the default model's trained part, as shipped."""
    from local_models.files import file_sha256

    try:
        return file_sha256(default_model_file())
    except OSError:
        return UNKNOWN


def version_info() -> dict[str, str]:
    built = build_info()
    return {
        "version": __version__,
        "revision": str(built.get("revision") or git_revision()),
        "built": str(built.get("built") or ""),
        "torch": package_version("torch"),
        "onnxruntime": package_version("onnxruntime"),
        "qt": package_version("qt"),
        "python": sys.version.split()[0],
        "default_model_sha256": default_model_sha256(),
        "default_model_int8": default_model_int8(),
    }


def version_text(info: dict[str, str] | None = None) -> str:
    info = info or version_info()
    revision = info["revision"] + (f" (built {info['built']})" if info.get("built") else "")
    return "\n".join([
        f"dynadesk {info['version']}",
        f"revision: {revision}",
        f"torch {info['torch']}, onnxruntime {info['onnxruntime']}, Qt (PySide6) {info['qt']}, "
        f"Python {info['python']}",
        f"default model (hate_speech_r1) sha256: {info['default_model_sha256']}",
        f"default model int8: {info.get('default_model_int8', UNKNOWN)}",
    ])
