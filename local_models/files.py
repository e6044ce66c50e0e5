"""Model files: the checksum that names a model, and building folders that appear whole or not at all."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

CHUNK = 1 << 20
# A staging folder of a process that no longer runs (a killed `dynadesk train`, a crash) is removed by
# the next build of the same folder; one whose maker cannot be told (made before its name carried the
# process id) once it is this old.
STALE_UNKNOWN_STAGING_S = 24 * 3600
_MKDTEMP = "[a-z0-9_]{8}"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_sha256(files: Iterable[tuple[str, Path]]) -> str:
    """sha256 over a manifest of (role/name, sha256 of content), sorted by name.

    Names rather than absolute paths go in, so a model folder that is copied or moved keeps
    its checksum, while renaming or editing any file that shapes its answers changes it.
    """
    lines = sorted(f"{name}\0{file_sha256(path)}\n" for name, path in files)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def plain_permissions(path: Path) -> None:
    """Give a file the permissions a plainly created one gets (safetensors writes 0600)."""
    os.chmod(path, 0o666 & ~_umask())


def make_staging_dir(final: Path) -> Path:
    """A hidden sibling folder of ``final`` to build in, renamed into place when complete (so a
    crash never leaves a half-written model that looks finished). It gets the permissions a
    plainly created folder would get, not mkdtemp's private ones."""
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-{os.getpid()}-", dir=final.parent))
    os.chmod(staging, 0o777 & ~_umask())
    return staging


def remove_stale_staging(final: Path) -> list[Path]:
    """Remove the staging folders of ``final`` that no running process will finish: those whose maker
    (named in the folder's name) has ended, and unnamed ones older than a day. Returns what went."""
    named = re.compile(rf"(\d+)-{_MKDTEMP}")
    unnamed = re.compile(_MKDTEMP)
    prefix = f".{final.name}-"
    removed: list[Path] = []
    try:
        siblings = list(final.parent.iterdir())
    except OSError:
        return removed
    for path in siblings:
        if not path.name.startswith(prefix) or path.is_symlink() or not path.is_dir():
            continue
        rest = path.name[len(prefix):]
        maker = named.fullmatch(rest)
        if maker:
            stale = not _running(int(maker.group(1)))
        elif unnamed.fullmatch(rest):
            try:
                stale = time.time() - path.stat().st_mtime > STALE_UNKNOWN_STAGING_S
            except OSError:
                continue
        else:
            continue  # another folder's staging (``final`` is a prefix of its name)
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (this one does; where that cannot be asked safely, assume it does)."""
    if pid == os.getpid() or sys.platform == "win32":  # signal 0 is not a probe on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def install_dir(staging: Path, final: Path, *, replace: bool) -> Path:
    """Rename a finished ``staging`` folder to ``final``.

    With ``replace`` an existing ``final`` is removed first (a new export over an old one).
    Without it, an existing ``final`` wins: another process built the same thing first.
    """
    if final.exists():
        if not replace:
            shutil.rmtree(staging, ignore_errors=True)
            return final
        shutil.rmtree(final)
    try:
        os.replace(staging, final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(staging, ignore_errors=True)  # lost a race to an identical build
    return final
