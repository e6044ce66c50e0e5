"""Hostile import files: every bad row is "line N: what is
wrong", never a Python exception, and --skip-bad-rows imports the rest; an id reused with other
content is a conflict naming both lines; one bad task file does not stop the desk.

The CLI runs in-process (``app.cli.main``), as a user runs it, on tiny files written here.
"""

import csv
import json

import pytest

from app.cli import main
from app.core.services.evaluation_data import EvaluationInputError, read_hatecheck_suite, read_labelled_file

ANLI = ["context", "statement", "reason", "adversary_pred", "gold_label", "uid"]
DYNAHATE = ["acl.id", "X1", "text", "label", "type", "target", "level", "split", "round.base", "annotator", "round",
            "acl.id.matched"]
HATECHECK = ["functionality", "case_id", "test_case", "label_gold", "target_ident"]
GOOD_ROWS = {
    "anli": lambda n: [f"A park in town {n}.", f"The town has a park {n}.", "stated", "e", "c", f"uid-{n}"],
    "dynahate": lambda n: [f"acl{n}", str(n), f"some text number {n}", "nothate", "none", "none", "original", "train",
                           "1", "GNZ1", "1", ""],
    "hatecheck": lambda n: ["derog_neg_emote_h", str(n), f"I dislike case {n}.", "hateful", "women"],
}
HEADERS = {"anli": ANLI, "dynahate": DYNAHATE, "hatecheck": HATECHECK}


def dynadesk(capsys, *args):
    """Runs the CLI as a user does; returns (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and "Error:" not in out.err.replace("Error: ", "", 1)
    return exited.value.code, out.out, out.err


def write_csv(path, header, rows) -> str:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def names_line(text, line, reason) -> bool:
    return any(row.strip().startswith(f"line {line}: ") and reason in row for row in text.splitlines())


def assert_refused_then_skipped(capsys, path, format_, line, reason):
    code, _, err = dynadesk(capsys, "import", path, "--format", format_)
    assert code == 1 and names_line(err, line, reason) and "nothing was imported" in err, err
    code, out, err = dynadesk(capsys, "import", path, "--format", format_, "--skip-bad-rows")
    assert code == 0, err
    assert "Skipped 1 bad row(s):" in out and names_line(out, line, reason), out
    return out


@pytest.mark.parametrize("format_", ["anli", "dynahate", "hatecheck"])
def test_a_short_row_and_an_open_quote_name_their_line_in_every_csv_format(capsys, tmp_path, format_):
    header, good = HEADERS[format_], GOOD_ROWS[format_]
    short = write_csv(tmp_path / "short.csv", header, [good(1), good(2)[:3], good(3)])
    out = assert_refused_then_skipped(capsys, short, format_, 3, f"the row has 3 field(s), fewer than the header's {len(header)}")
    assert "2 suite cases" in out if format_ == "hatecheck" else "2 examples" in out

    text = write_csv(tmp_path / "quote.csv", header, [good(4)]).read_text(encoding="utf-8")
    (tmp_path / "quote.csv").write_text(text + ",".join(good(5)).replace(",", ',"', 1) + "\n", encoding="utf-8")
    assert_refused_then_skipped(capsys, tmp_path / "quote.csv", format_, 3,
                                "a quoted field opens in this row and is never closed")


def test_infinite_or_huge_numbers_in_an_integer_column_name_their_line(capsys, tmp_path):
    rows = [GOOD_ROWS["dynahate"](n) for n in range(1, 5)]
    for row, value in zip(rows[1:], ["inf", "1e400", "99999999999999999999999"]):
        row[8] = value
    path = write_csv(tmp_path / "numbers.csv", DYNAHATE, rows)
    code, _, err = dynadesk(capsys, "import", path, "--format", "dynahate")
    assert code == 1
    assert "line 3: round.base 'inf' is not a whole number" in err
    assert "line 4: round.base '1e400' is not a whole number" in err
    assert "line 5: round.base 99999999999999999999999 is out of range" in err
    code, out, _ = dynadesk(capsys, "import", path, "--format", "dynahate", "--skip-bad-rows")
    assert code == 0 and "1 examples" in out and "Skipped 3 bad row(s)" in out
    code, _, err = dynadesk(capsys, "import", path, "--format", "anli", "--round", "99999999999999999999")
    assert code == 2 and "--round" in err


@pytest.fixture
def exported_jsonl(capsys, tmp_path):
    """The records of a tiny data set, as `dynadesk export --format jsonl` writes them."""
    source = write_csv(tmp_path / "source.csv", DYNAHATE, [GOOD_ROWS["dynahate"](n) for n in (1, 2)])
    other = tmp_path / "other-desk"
    assert dynadesk(capsys, "--data-dir", other, "import", source, "--format", "dynahate")[0] == 0
    assert dynadesk(capsys, "--data-dir", other, "export", tmp_path / "all.jsonl", "--format", "jsonl",
                    "--task", "hate_speech")[0] == 0
    return [json.loads(line) for line in (tmp_path / "all.jsonl").read_text(encoding="utf-8").splitlines()]


def write_jsonl(path, records, extra_line: str) -> tuple:
    lines = [json.dumps(r) for r in records] + [extra_line]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, len(lines)


@pytest.mark.parametrize("spoil, reason", [
    (lambda r: json.dumps({**r, "inputs": "just a string"}), "'inputs' must be an object, not \"just a string\""),
    (lambda r: json.dumps({**r, "inputs": ["a", "list"]}), "'inputs' must be an object"),
    (lambda r: "[" * 100_000 + "]" * 100_000, "nested too deep"),
    (lambda r: json.dumps(r).replace('"time_spent_ms": 0', '"time_spent_ms": 1e400'), "the number 1e400 is too large"),
    (lambda r: json.dumps(r).replace('"time_spent_ms": 0', '"time_spent_ms": 99999999999999999999999'),
     "the number 99999999999999999999999 is too large"),
    (lambda r: json.dumps({**r, "time_spent_ms": "inf"}), "time_spent_ms 'inf' is not a whole number"),
])
def test_a_hostile_jsonl_record_names_its_line(capsys, tmp_path, exported_jsonl, spoil, reason):
    examples = [r for r in exported_jsonl if r["record"] == "example"]
    kept = [r for r in exported_jsonl if r is not examples[1]]
    path, bad_line = write_jsonl(tmp_path / "bad.jsonl", kept, spoil(examples[1]))
    out = assert_refused_then_skipped(capsys, path, "jsonl", bad_line, reason)
    assert "1 examples" in out


def test_an_anli_uid_reused_with_other_content_is_a_conflict_naming_both_lines(capsys, tmp_path):
    first, second = GOOD_ROWS["anli"](1), GOOD_ROWS["anli"](2)
    clash = [*GOOD_ROWS["anli"](3)[:5], "uid-1"]
    path = write_csv(tmp_path / "anli.csv", ANLI, [first, second, clash])
    out = assert_refused_then_skipped(capsys, path, "anli", 4, "uid uid-1 is also on line 2, with different content")
    assert "2 examples" in out and "already present" not in out

    # the same file again: the two stored rows are already present, the conflict is still one
    code, out, _ = dynadesk(capsys, "import", path, "--format", "anli", "--skip-bad-rows")
    assert code == 0 and "2 record(s) were already present" in out and "line 4: uid uid-1 is also on line 2" in out

    # a row identical to the first is read once; it is neither a conflict nor "already present"
    path = write_csv(tmp_path / "repeat.csv", ANLI, [GOOD_ROWS["anli"](5), GOOD_ROWS["anli"](5)])
    code, out, _ = dynadesk(capsys, "import", path, "--format", "anli")
    assert code == 0 and "1 examples" in out and "line 3 repeats line 2 exactly" in out and "already" not in out

    # a later file that gives a stored uid other content does not claim it was already present
    path = write_csv(tmp_path / "later.csv", ANLI, [[*GOOD_ROWS["anli"](6)[:5], "uid-2"]])
    code, _, err = dynadesk(capsys, "import", path, "--format", "anli")
    assert code == 1 and "line 2: uid-2 is already on this desk with different content" in err


def test_a_jsonl_example_id_reused_with_other_content_is_a_conflict(capsys, tmp_path, exported_jsonl):
    example = next(r for r in exported_jsonl if r["record"] == "example")
    changed = json.dumps({**example, "inputs": {"text": "something else entirely"}})
    path, bad_line = write_jsonl(tmp_path / "dup.jsonl", exported_jsonl, changed)
    first_line = exported_jsonl.index(example) + 1
    out = assert_refused_then_skipped(capsys, path, "jsonl", bad_line,
                                      f"the example {example['id']} is also on line {first_line}, with different content")
    assert "2 examples" in out

    path, bad_line = write_jsonl(tmp_path / "changed.jsonl", [example], json.dumps({"record": "noop"}))
    path.write_text(changed + "\n", encoding="utf-8")
    code, _, err = dynadesk(capsys, "import", path, "--format", "jsonl")
    assert code == 1 and f"example {example['id']} is already on this desk with different content" in err


def test_evaluation_files_name_the_bad_line(tmp_path):
    quote = tmp_path / "held_out.csv"
    quote.write_text('text,label\nfine,hate\n"never closed,hate\n', encoding="utf-8")
    with pytest.raises(EvaluationInputError, match="line 3: a quoted field opens in this row and is never closed"):
        read_labelled_file(quote)
    deep = tmp_path / "held_out.jsonl"
    deep.write_text('{"text": "fine", "label": "hate"}\n' + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(EvaluationInputError, match="line 2: .*nested too deep"):
        read_labelled_file(deep)
    short = write_csv(tmp_path / "suite.csv", HATECHECK, [GOOD_ROWS["hatecheck"](1), ["derog_neg_emote_h", "2"]])
    with pytest.raises(EvaluationInputError, match="line 3: the row has 2 field"):
        read_hatecheck_suite(short)


def test_one_bad_task_file_is_reported_and_the_rest_of_the_desk_works(capsys, tmp_path, data_dir):
    (data_dir / "tasks").mkdir()
    (data_dir / "tasks" / "broken.yaml").write_text("code: x\nname: [unclosed\n", encoding="utf-8")
    code, out, err = dynadesk(capsys, "tasks", "list")
    assert code == 0 and "hate_speech" in out and "broken.yaml" in out and "is not valid YAML" in out
    assert "broken.yaml" not in err
    code, out, err = dynadesk(capsys, "export", tmp_path / "out.jsonl", "--format", "jsonl", "--task", "hate_speech")
    assert code == 0 and "Exported" in out
    assert err.count("broken.yaml") == 1 and err.startswith("Warning:")


def test_imported_author_names_keep_no_control_characters(capsys, tmp_path, data_dir):
    """Imported authors go out as person records when a data set is shared, and the server refuses
    a name with control characters: they are written as escapes on import."""
    from app.core.desk import Desk
    from app.core.storage.models import Person
    from app.core.text import control_characters

    row = GOOD_ROWS["dynahate"](1)
    row[DYNAHATE.index("annotator")] = "GNZ\x1b[2J\x07"
    path = write_csv(tmp_path / "dynahate.csv", DYNAHATE, [row])
    record = {"record": "person", "id": "00000000-0000-0000-0000-0000000000e1", "display_name": "Eve\u202eevil",
              "role": "annotator"}
    jsonl = tmp_path / "people.jsonl"
    jsonl.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert dynadesk(capsys, "import", path, "--format", "dynahate")[0] == 0
    assert dynadesk(capsys, "import", jsonl, "--format", "jsonl")[0] == 0
    with Desk(data_dir) as desk, desk.db.read() as session:
        names = [p.display_name for p in session.query(Person) if "GNZ" in p.display_name or "Eve" in p.display_name]
    assert sorted(names) == ["DynaHate annotator GNZ\\x1b[2J\\x07", "Eve\\u202eevil"]
    assert not any(control_characters(name) for name in names)


@pytest.mark.parametrize("format_,id_column,text_column", [("anli", "uid", "statement"),
                                                         ("dynahate", "acl.id", "text"),
                                                         ("hatecheck", "case_id", "test_case")])
def test_every_csv_format_reads_an_exact_repeat_once_and_names_a_reused_or_empty_id(capsys, tmp_path, format_,
                                                                                    id_column, text_column):
    header, good = HEADERS[format_], GOOD_ROWS[format_]
    reused, empty = good(1), good(2)
    reused[header.index(text_column)] = "Other words under the same id."
    empty[header.index(id_column)] = " "
    path = write_csv(tmp_path / f"{format_}.csv", header, [good(1), good(1), reused, empty, good(3)])
    code, out, err = dynadesk(capsys, "import", path, "--format", format_, "--skip-bad-rows")
    assert code == 0, err
    assert "line 3 repeats line 2 exactly" in out, out
    assert names_line(out, 4, f"{id_column} {good(1)[header.index(id_column)]} is also on line 2"), out
    assert names_line(out, 5, f"{id_column} is empty"), out
    assert "Skipped 2 bad row(s):" in out, out
