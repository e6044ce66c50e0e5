"""The previous tagged release, built for tests: its source at the tag (a ``git worktree``) and its own venv.

Cross-version tests run the previous release for real: its desk, its server, its migrations. The release is
found by its tag, or by the commit the tag names (recorded here, so a clone without tags still finds it).

The venv is built from the release's own ``requirements.lock``. When that lock is the one this checkout is
installed from, the venv reuses this interpreter's installed packages (the same locked set, byte for byte
the same lock) instead of installing them again; otherwise it installs the release's lock with pip. The
release's own code is on its path (a ``.pth`` naming the worktree: an editable install), never this
checkout's.

Built once per machine under ``.previous-release/`` in the checkout (ignored by git), under a file lock so
that parallel test workers wait for one build.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS_TAG = "v0.1.0"
PREVIOUS_COMMIT = "be167044896d298ca0ca4441cf4c0c265f5ed449"
PREVIOUS_PROTOCOL = 1
TORCH_PIN = "torch==2.13.0"
BUILD_TIMEOUT_S = 1800


class PreviousReleaseUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class PreviousRelease:
    tag: str
    commit: str
    source: Path
    python: Path

    def env(self, **extra: str) -> dict[str, str]:
        """An environment that imports the release's code, never this checkout's."""
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env.update({"QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        env.update(extra)
        return env

    def cli(self, *args: str) -> list[str]:
        """The command line of ``dynadesk ARGS`` as the previous release runs it."""
        return [str(self.python), "-m", "app", *args]

    def run(self, *args: str, data_dir: Path | None = None, input: str | None = None, timeout: float = 600,
            check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        argv = self.cli(*([f"--data-dir={data_dir}"] if data_dir else []), *args)
        done = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout,
                              cwd=self.source, env=self.env(**env))
        if check and done.returncode != 0:
            raise AssertionError(f"previous release: {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def script(self, code: str, *args: str, timeout: float = 600, **env: str) -> str:
        """Run Python CODE inside the previous release (its ``app``, ``sync``, ``local_models``); its stdout."""
        done = subprocess.run([str(self.python), "-c", code, *args], capture_output=True, text=True,
                              timeout=timeout, cwd=self.source, env=self.env(**env))
        if done.returncode != 0:
            raise AssertionError(f"previous release script exited {done.returncode}:\n{done.stderr[-4000:]}")
        return done.stdout


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def resolve_commit() -> str:
    """The previous release's commit: the tag's, or the recorded one when the clone has no tags."""
    for ref in (f"{PREVIOUS_TAG}^{{commit}}", f"{PREVIOUS_COMMIT}^{{commit}}"):
        try:
            return _git("rev-parse", "--verify", "--quiet", ref)
        except subprocess.CalledProcessError:
            continue
    raise PreviousReleaseUnavailable(
        f"this clone has neither the tag {PREVIOUS_TAG} nor its commit {PREVIOUS_COMMIT[:12]}: the cross-version "
        "tests need the project's history (clone without --depth, or fetch the tags)")


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def _build(commit: str, home: Path) -> None:
    source, venv = home / "source", home / "venv"
    if source.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(source)], cwd=ROOT, capture_output=True)
        shutil.rmtree(source, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)
    _git("worktree", "add", "--detach", "--force", str(source), commit)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=BUILD_TIMEOUT_S)
    python = venv / "bin" / "python"
    ours = sysconfig.get_paths()["purelib"]
    if (source / "requirements.lock").read_bytes() == (ROOT / "requirements.lock").read_bytes():
        # The same locked set is installed here: the release's venv sees it, and nothing else of this venv
        # (its .pth files, among them this checkout's editable install, are not read from an added path).
        (_site_packages(python) / "_same_lock.pth").write_text(ours + "\n")
    else:
        subprocess.run([python, "-m", "ensurepip", "--upgrade"], check=True, timeout=BUILD_TIMEOUT_S)
        for args in ([TORCH_PIN], ["-r", str(source / "requirements.lock")]):
            subprocess.run([python, "-m", "pip", "install", "--quiet", *args], check=True, timeout=BUILD_TIMEOUT_S)
    # The release's own code, installed into its venv (an editable install: the worktree is its source).
    (_site_packages(python) / "_previous_release.pth").write_text(str(source) + "\n")
    version = subprocess.run([python, "-c", "import app, sys; print(app.__version__, app.__file__)"],
                             capture_output=True, text=True, check=True, cwd=home).stdout.split()
    if Path(version[1]).resolve().parent.parent != source.resolve():
        raise PreviousReleaseUnavailable(f"the previous release's venv imports app from {version[1]}")
    (home / "ready").write_text(commit + "\n")


def previous_release() -> PreviousRelease:
    """The previous release, built on first use (a few seconds when the lock is unchanged)."""
    commit = resolve_commit()
    home = ROOT / ".previous-release" / commit[:12]
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = home / "ready"
        if not (ready.is_file() and ready.read_text().strip() == commit and (home / "source" / "app").is_dir()):
            _build(commit, home)
    return PreviousRelease(PREVIOUS_TAG, commit, home / "source", home / "venv" / "bin" / "python")
