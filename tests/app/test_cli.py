import json

import pytest

from tests.cli_in_process import run_dynadesk
from tests.conftest import FIXTURES, shared_file


def dynadesk(*args, data_dir, env=None):
    """The command as a person runs it, in this process (see tests.cli_in_process)."""
    return run_dynadesk(*args, env={"DYNADESK_DATA_DIR": str(data_dir), **(env or {})})


def assert_clean_failure(result, message):
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    assert message in result.stderr


@pytest.mark.parametrize("command", [[], ["init"], ["import"], ["export"], ["stats"], ["tasks"], ["tasks", "list"],
                                     ["tasks", "validate"]])
def test_every_command_has_help(data_dir, command):
    result = dynadesk(*command, "--help", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout


def test_init_import_stats_export_from_the_command_line(data_dir, tmp_path):
    result = dynadesk("init", "--name", "Ada Lovelace", "--role", "lead", "--without-default-model", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "Profile:     Ada Lovelace (lead)" in result.stdout
    assert "hate_speech" in result.stdout

    result = dynadesk("import", FIXTURES / "dynahate_sample.csv", "--format", "dynahate", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "10 examples" in result.stdout and "3 perturbation links" in result.stdout

    result = dynadesk("stats", "--by", "round", "--json", data_dir=data_dir)
    figures = json.loads(result.stdout)["round"]
    # imported data set: counted apart, outside MER and vMER (nothing written on a desk yet)
    assert sorted((f["name"], f["submitted"], f["imported"]) for f in figures) == [
        ("Hate speech · round 1", 0, 3), ("Hate speech · round 2", 0, 3), ("Hate speech · round 3", 0, 2),
        ("Hate speech · round 4", 0, 2)]
    table = dynadesk("stats", data_dir=data_dir).stdout
    assert "By annotator" in table and "DynaHate annotator GNZ1" in table and "vMER" in table

    out = tmp_path / "out.csv"
    result = dynadesk("export", out, "--format", "csv", "--task", "hate_speech", data_dir=data_dir)
    assert result.returncode == 0 and "Exported 10 examples" in result.stdout
    assert out.read_text(encoding="utf-8").count("\n") == 11

    listing = dynadesk("tasks", "list", data_dir=data_dir).stdout
    assert "1 (open), 2 (open), 3 (open), 4 (open)" in listing


def test_failures_are_readable_messages_with_a_non_zero_status(data_dir, tmp_path):
    assert_clean_failure(dynadesk("import", tmp_path / "missing.csv", "--format", "anli", data_dir=data_dir),
                         "There is no file at")
    assert_clean_failure(dynadesk("import", FIXTURES / "dynahate_sample.csv", "--format", "hatecheck",
                                  data_dir=data_dir), "not a hatecheck file")
    assert_clean_failure(dynadesk("stats", "--task", "chess", data_dir=data_dir), "There is no task 'chess'")
    assert_clean_failure(dynadesk("export", tmp_path / "x.csv", "--format", "csv", data_dir=data_dir),
                         "holds one task")
    assert_clean_failure(dynadesk("frobnicate", data_dir=data_dir), "No such command")
    bad_task = tmp_path / "bad.yaml"
    bad_task.write_text("code: x\nname: X\ninputs: []\nlabels: [a, b]\n")
    result = dynadesk("tasks", "validate", bad_task, data_dir=data_dir)
    assert_clean_failure(result, "1 of 1 definition(s) have problems")
    assert "field 'inputs'" in result.stdout


def test_a_broken_database_is_explained(data_dir):
    (data_dir / "dynadesk.sqlite").write_bytes(b"garbage" * 1000)
    assert_clean_failure(dynadesk("stats", data_dir=data_dir), "cannot be opened as a Dynadesk database")


def test_a_bad_row_in_an_import_names_its_line(data_dir, tmp_path):
    path = shared_file("anli", "ANLI_analysis_r1_dev.csv")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    # keep the header and two whole records, then spoil the label of a third
    import csv
    import io

    rows = list(csv.reader(io.StringIO("".join(lines))))[:4]
    rows[3][4] = "x"
    broken = tmp_path / "anli.csv"
    with broken.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
    result = dynadesk("import", broken, "--format", "anli", data_dir=data_dir)
    assert_clean_failure(result, "gold_label 'x' is not e, n or c")
    assert "nothing was imported" in result.stderr


def test_data_dir_option_overrides_the_environment(data_dir, tmp_path):
    chosen = tmp_path / "elsewhere"
    result = dynadesk("--data-dir", chosen, "init", "--without-default-model", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert (chosen / "dynadesk.sqlite").exists() and not (data_dir / "dynadesk.sqlite").exists()
    assert f"Data folder: {chosen}" in result.stdout
