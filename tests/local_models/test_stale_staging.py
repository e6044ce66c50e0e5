"""A killed build (``dynadesk train`` stopped with SIGKILL) leaves its hidden staging folder; the next build
of the same folder removes it, and never one a running process is still filling."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from local_models.files import STALE_UNKNOWN_STAGING_S, make_staging_dir

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and process probes are POSIX here")

MAKER = """
import sys, time
from pathlib import Path
from local_models.files import make_staging_dir
staging = make_staging_dir(Path(sys.argv[1]))
(staging / "part.bin").write_bytes(b"half")
print(staging, flush=True)
time.sleep(600)
"""


def _killed_build(out) -> str:
    child = subprocess.Popen([sys.executable, "-c", MAKER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
    finally:
        child.kill()
        child.wait(timeout=60)
    return line


def test_a_killed_builds_staging_folder_goes_with_the_next_build_a_live_one_stays(tmp_path):
    out = tmp_path / "runs" / "r2"
    killed = _killed_build(out)
    assert killed and os.path.isdir(killed)
    other = tmp_path / "runs" / ".r2-extra-1234-abcdefgh"  # the staging of another folder, "r2-extra": not ours
    other.mkdir()
    old = tmp_path / "runs" / ".r2-k2j4h5g6"  # unnamed, from before names carried the process id
    old.mkdir()
    past = time.time() - STALE_UNKNOWN_STAGING_S - 60
    os.utime(old, (past, past))
    recent = tmp_path / "runs" / ".r2-z9y8x7w6"
    recent.mkdir()

    live = subprocess.Popen([sys.executable, "-c", MAKER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        running = live.stdout.readline().strip()  # its maker cleaned first, then made its own
        assert running and os.path.isdir(running)
        mine = make_staging_dir(out)
        assert not os.path.exists(killed) and not old.exists()
        assert os.path.isdir(running) and recent.exists() and other.exists() and mine.is_dir()
    finally:
        live.kill()
        live.wait(timeout=60)
