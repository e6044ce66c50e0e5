"""Bad desk files: a database damaged mid-file, a read-only database
file, a read-only data folder. Each gives one clear message, and a damaged file takes no writes."""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from app.cli import main
from app.core import logs
from app.core.desk import Desk
from app.core.errors import DatabaseError
from app.core.storage.db import DAILY_BACKUPS_KEPT, Database, daily_backups
from tests.conftest import ROOT

PAGE = 4096
HEADER = "acl.id,X1,text,label,type,target,level,split,round.base,annotator,round,acl.id.matched\n"


def dynahate_csv(path, n: int, prefix: str):
    rows = (f'{prefix}{i},{i},"{prefix} example number {i} about the neighbours",nothate,none,none,original,train,1,'
            f"A{i % 7},1,\n" for i in range(n))
    path.write_text(HEADER + "".join(rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def healthy_desk(tmp_path_factory):
    """A data folder holding 300 imported examples and its first daily copy (made at the second open)."""
    folder = tmp_path_factory.mktemp("healthy") / "data"
    with Desk(folder) as desk:
        from app.core.io.importers import import_file

        import_file(desk, dynahate_csv(folder.parent / "first.csv", 300, "old"), "dynahate")
    with Desk(folder) as desk:
        desk.db.wait_for_check()
    assert len(daily_backups(folder / "dynadesk.sqlite")) == 1
    return folder


def copy_of(healthy_desk, data_dir):
    shutil.rmtree(data_dir)
    shutil.copytree(healthy_desk, data_dir)
    return data_dir / "dynadesk.sqlite"


def damage(path):
    """Garbage over four pages in the middle of the file (in place, as a failing disk would): pages
    of example rows, so that opening the desk still works and only the check or a query finds it."""
    with sqlite3.connect(path) as raw:
        pages = [row[0] for row in raw.execute(
            "SELECT pageno FROM dbstat WHERE name = 'examples' AND pagetype = 'leaf' ORDER BY pageno")]
    rng = random.Random(16)
    with open(path, "r+b") as file:
        for page in pages[len(pages) // 2 - 2:len(pages) // 2 + 2]:
            file.seek((page - 1) * PAGE)
            file.write(rng.randbytes(PAGE))
    return path


@pytest.fixture
def damaged(healthy_desk, data_dir):
    """``data_dir`` holds the healthy desk, with a few pages in the middle of its database garbage."""
    return damage(copy_of(healthy_desk, data_dir))


@pytest.fixture(autouse=True)
def restore_logging():
    """main() sets logging up for its data folder; leave the root logger as it was."""
    root = logging.getLogger()
    handlers, level, handler = list(root.handlers), root.level, logs._handler
    yield
    for extra in set(root.handlers) - set(handlers):
        root.removeHandler(extra)
        extra.close()
    root.setLevel(level)
    logs._handler = handler


def run_cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main([*map(str, args)])
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def examples_in(path) -> int:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT count(*) FROM examples").fetchone()[0]


def test_a_database_damaged_mid_file_is_refused_and_the_daily_copy_restores_it(capsys, damaged, tmp_path):
    backup = daily_backups(damaged)[-1]
    code, out, err = run_cli(capsys, "stats")
    assert code == 1, out
    assert "is damaged" in err and "Restore a backup" in err and str(backup) in err and "restore-backup" in err
    assert "SELECT" not in err and "Traceback" not in err and "sqlite3" not in err

    code, out, err = run_cli(capsys, "import", dynahate_csv(tmp_path / "new.csv", 400, "new"), "--format", "dynahate")
    assert code == 1 and "is damaged" in err and "Imported" not in out

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"garbage" * 1000)
    code, out, err = run_cli(capsys, "restore-backup", garbage, "--yes")
    assert code == 1 and f"the backup {garbage} cannot be used: it is damaged" in err
    assert not list(damaged.parent.glob("dynadesk.set-aside.*"))  # nothing was moved

    code, out, err = run_cli(capsys, "restore-backup", "--yes")
    assert code == 0, err
    assert f"Restored {backup}" in out
    assert examples_in(damaged) == 300  # the copy, with none of the refused rows
    kept_aside = list(damaged.parent.glob("dynadesk.set-aside.*.sqlite"))
    assert len(kept_aside) == 1  # the damaged file is kept, and never offered as a backup
    code, out, err = run_cli(capsys, "restore-backup", "--list")
    assert str(backup) in out and "set-aside" not in out
    code, out, err = run_cli(capsys, "stats", "--by", "task", "--json")
    assert code == 0 and '"imported": 300' in out, err  # DynaHate rows: an imported data set, counted apart


def test_damage_found_by_the_background_check_refuses_writes(damaged):
    db = Database(damaged)  # opens: the damage is away from what opening reads
    try:
        db.wait_for_check()
        assert db.damage is not None and "Restore a backup" in str(db.damage)
        with pytest.raises(DatabaseError, match="is damaged"):
            with db.write():
                pass
        with pytest.raises(DatabaseError, match="is damaged"):
            db.ensure_intact()
    finally:
        db.close()
    assert len(daily_backups(damaged)) == 1  # a damaged file is never copied over a good one


def test_the_daily_copy_is_made_once_a_day_and_only_the_last_few_are_kept(healthy_desk, data_dir):
    db = Database(copy_of(healthy_desk, data_dir))
    try:
        db.wait_for_check()
        assert db.daily_backup() is None  # the newest copy is not a day old
        for _day in range(1, DAILY_BACKUPS_KEPT + 2):
            for copy in daily_backups(db.path):
                os.utime(copy, (copy.stat().st_atime, copy.stat().st_mtime - 86_400 - 1))
            made = db.daily_backup()
            assert made is not None and examples_in(made) == 300
        copies = daily_backups(db.path)
        assert len(copies) == DAILY_BACKUPS_KEPT and copies[-1] == made
    finally:
        db.close()


def test_the_gui_says_the_database_is_damaged_without_a_traceback(qtbot, healthy_desk, data_dir, modal_log):
    from tests.gui.conftest import close_window, open_window

    window = open_window(qtbot, copy_of(healthy_desk, data_dir).parent)
    try:
        damage(window.desk.db.path)
        window.db.submit(window.desk.db.ensure_intact)  # as before an import or a sync, on the worker
        qtbot.waitUntil(lambda: any(title == "Database damaged" for _, title, _ in modal_log), timeout=10_000)
        kind, _, text = next(call for call in modal_log if call[1] == "Database damaged")
        assert kind == "critical" and "Restore a backup" in text and "restore-backup" in text
        after = []  # the worker is serial: once this job's answer is in, the refusal before it was delivered
        window.db.submit(lambda: None, on_done=after.append)
        qtbot.waitUntil(lambda: after == [None], timeout=10_000)
        assert [title for _, title, _ in modal_log] == ["Database damaged"]
    finally:
        close_window(window)


def test_the_gui_explains_a_database_it_cannot_open(data_dir, modal_log):
    from app.gui.main import run_gui

    (data_dir / "dynadesk.sqlite").write_bytes(b"not a database" * 500)
    assert run_gui(str(data_dir)) == 1
    assert modal_log[-1][:2] == ("critical", "Dynadesk cannot start")
    assert "cannot be opened as a Dynadesk database" in modal_log[-1][2]
    assert "restore a backup" in modal_log[-1][2]


@pytest.fixture
def make_read_only():
    """Makes a file or folder read-only for everyone, root included (``chattr +i``: root ignores
    permission bits); skips the test where that is not possible."""
    made: list = []

    def read_only(path):
        if os.geteuid() != 0:
            path.chmod(0o555 if path.is_dir() else 0o444)
        elif shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)],
                                                              capture_output=True).returncode != 0:
            pytest.skip("cannot make a path read-only for root here (no chattr +i)")
        made.append(path)
        return path

    yield read_only
    for path in reversed(made):
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=False)
        else:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_read_only_database_file_says_so_not_restore_a_backup(capsys, healthy_desk, data_dir, make_read_only,
                                                                 tmp_path):
    make_read_only(copy_of(healthy_desk, data_dir))
    code, out, err = run_cli(capsys, "import", dynahate_csv(tmp_path / "new.csv", 5, "new"), "--format", "dynahate")
    assert code == 1
    assert f"the database file {data_dir / 'dynadesk.sqlite'} is read-only" in err
    assert "backup" not in err and "Traceback" not in err and "INSERT" not in err


def test_a_read_only_data_folder_gives_one_sentence_and_no_traceback(data_dir, make_read_only):
    make_read_only(data_dir)  # empty: there is no database yet, and no logs folder
    result = subprocess.run([sys.executable, "-m", "app", "stats"], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "DYNADESK_DATA_DIR": str(data_dir)}, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    warning, error = result.stderr.strip().splitlines()
    assert warning.startswith(f"Warning: Dynadesk cannot write its log: the folder {data_dir} is read-only")
    assert error == (f"Error: the data folder {data_dir} is read-only; Dynadesk keeps its database there and needs "
                     "to write to it. Make the folder writable, or choose another with --data-dir.")


def test_a_sync_checks_the_database_first_and_sends_nothing_from_a_damaged_one(healthy_desk, data_dir):
    import httpx

    from sync.client import SyncClient

    requests = []
    transport = httpx.MockTransport(lambda request: requests.append(request) or httpx.Response(500))
    with Desk(copy_of(healthy_desk, data_dir).parent) as desk:
        desk.db.wait_for_check()
        damage(desk.db.path)  # after the check at open: only the check before the sync can see it
        with SyncClient(desk, "http://127.0.0.1:9", "token", transport=transport) as client:
            with pytest.raises(DatabaseError, match="Restore a backup"):
                client.run()
    assert requests == []


def test_settings_in_a_read_only_folder_are_refused_with_a_sentence(tmp_path, make_read_only):
    from app.core.errors import DynadeskError
    from app.core.settings import Settings, SettingsStore

    (tmp_path / "settings-folder").mkdir()
    folder = make_read_only(tmp_path / "settings-folder")
    with pytest.raises(DynadeskError, match=re.escape(f"the settings cannot be saved: the folder {folder} is read-only")):
        SettingsStore(folder / "settings.json").save(Settings())


def test_desk_files_nested_past_any_reader_are_set_aside_with_a_sentence_not_a_crash(capsys, data_dir):
    """The first command on a desk whose settings (or token) file holds JSON nested past Python's
    recursion limit: it runs on defaults, says why, and keeps the old file; no RecursionError."""
    from sync.tokens import TokenStore

    deep = "[" * 100_000 + "]" * 100_000
    (data_dir / "settings.json").write_text(deep, encoding="utf-8")
    code, out, err = run_cli(capsys, "--data-dir", data_dir, "stats")
    assert code == 0, err
    assert "RecursionError" not in err and "Unexpected error" not in err
    kept = list(data_dir.glob("settings.json.unreadable-*"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == deep
    store = TokenStore(data_dir)
    store.file.parent.mkdir(parents=True, exist_ok=True)
    store.file.write_text(deep, encoding="utf-8")
    os.chmod(store.file, 0o600)
    assert store.get("https://server.example") is None
