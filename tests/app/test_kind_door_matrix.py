"""Every kind of data through every door of the desk (DESIGN.md §4.12), with figures checked against a hand count.

The kinds are built once for the module, each hate-speech kind in a round of its own (so a round's figures
are the kind's), and each door is run on every kind: stats (every grouping), the dashboard's tables, the
Review figures, the Validate queue, export (jsonl, csv, hf), the Next-round counts and training set, and the
JSONL round trip onto a second desk. Where a door does not apply to a kind (a HateCheck suite is test
cases, not examples), the door says so in one sentence and the test checks it.

Sync's doors (push, pull on a second desk, share-imported, publish) run with a server in
tests/sync/test_printed_fixes.py; model-scoring doors (eval, quality, the leaderboard) in their own tests.
"""

from __future__ import annotations

import csv
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core.desk import Desk
from app.core.services.dashboard_snapshot import DashboardFilter
from app.core.services.review import ExampleFilter
from app.core.services.stats import GROUPINGS
from tests.app.test_stats import csv_slice
from tests.conftest import FIXTURES, hate_content, hate_output, shared_file

HATE = "hate_speech"


@dataclass
class Kind:
    """One kind of data: where it lives and its hand count (examples that count, imported, fooling, undecided)."""

    name: str
    task: str
    round: int | None
    written: int = 0  # submitted or flagged, written on a desk: MER's denominator
    imported: int = 0
    fooled: int = 0  # of the written
    retracted: int = 0
    data_set: str = ""  # the imported data set's name (the Next round's choice)
    outputs: bool = True  # carries a model's outputs (imported before a target ran: none; the per-model figures skip it)

    @property
    def non_draft(self) -> int:
        return self.written + self.imported + self.retracted


def pulled_example(desk: Desk, tmp: Path, model) -> None:
    """An example written on another desk, arriving through a sync pull page."""
    from app.core.io.records import dump_example, dump_model, dump_person, dump_round
    from sync.incoming import apply_page

    with Desk(tmp / "other-desk") as other:
        writer = other.people.create("Pia Puller", "annotator")
        mine = other.models.register(model.name, "hf-torch", model.sha256, task_id=other.tasks.task(HATE).id,
                                     label_map=model.label_map)
        round_ = other.tasks.get_or_create_round(HATE, 14)
        example = other.examples.create(writer.id, HATE, hate_content("written on another desk", "hate"),
                                        [hate_output(mine, "not hate")], round_number=14)
        with other.db.read() as session:
            from app.core.storage.models import Example, Person

            stored = session.get(Example, example.id)
            record = {**dump_example(stored, HATE), "round_number": 14, "context_hash": None}
            records = [dump_person(session.get(Person, writer.id)), dump_model(mine, HATE),
                       dump_round(round_, HATE, [mine.id]), record]
    apply_page(desk.db, records, [], key="sync.cursor.matrix", cursor=1)


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    from app.core.io.exporters import export
    from app.core.io.importers import import_file
    from app.core.services.lead import REVISION

    tmp = tmp_path_factory.mktemp("matrix")
    desk = Desk(tmp / "desk")
    author = desk.people.create("Ana Author", "annotator")
    validator = desk.people.create("Vic Validator", "annotator")
    lead = desk.people.create("Lee Lead", "lead")
    task = desk.tasks.task(HATE)
    model = desk.models.register("test hate model", "hf-torch", "ab" * 32, task_id=task.id,
                                 label_map={"0": "not hate", "1": "hate"})
    for n in range(10, 16):
        desk.tasks.get_or_create_round(HATE, n)

    def write(text, label="hate", said="not hate", round_number=10, **kwargs):
        return desk.examples.create(author.id, HATE, hate_content(text, label), [hate_output(model, said)],
                                    round_number=round_number, **kwargs)

    out: dict[str, Kind] = {}
    write("written on the desk, fooling")
    write("written on the desk, not fooling", said="hate")
    out["written"] = Kind("written", HATE, 10, written=2, fooled=1)

    original = write("they are all vermin", round_number=11)
    write("they are all lovely", label="not hate", said="not hate", round_number=11, perturbation_of=original.id)
    out["perturbation pair"] = Kind("perturbation pair", HATE, 11, written=2, fooled=1)

    returned = write("returned by the lead", round_number=12)
    desk.lead.return_examples(lead.id, [returned.id], "say who is meant")
    write("returned by the lead, revised", round_number=12, origin={"kind": REVISION, "of": str(returned.id)})
    out["returned then revised"] = Kind("returned then revised", HATE, 12, written=2, fooled=2)

    gone = write("retracted by its author", round_number=13)
    desk.examples.retract(gone.id, author.id)
    out["retracted"] = Kind("retracted", HATE, 13, retracted=1)

    pulled_example(desk, tmp, model)
    out["pulled"] = Kind("pulled", HATE, 14, written=1, fooled=1)

    cases = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp / "hatecheck.csv", 6)
    import_file(desk, cases, "hatecheck", round_number=15, group_column="templ_id")
    out["hatecheck round"] = Kind("hatecheck round", HATE, 15, imported=6, data_set="hatecheck", outputs=False)
    import_file(desk, cases, "hatecheck")
    out["hatecheck suite"] = Kind("hatecheck suite", HATE, None)

    import_file(desk, FIXTURES / "dynahate_sample.csv", "dynahate")  # into the rounds its round.base names
    with open(FIXTURES / "dynahate_sample.csv", newline="", encoding="utf-8") as handle:
        in_round_1 = sum(row["round.base"] == "1" for row in csv.DictReader(handle))
    out["dynahate"] = Kind("dynahate", HATE, 1, imported=in_round_1, data_set="dynahate", outputs=False)

    nli_model = desk.models.register("nli model", "hf-torch", "cd" * 32, task_id=desk.tasks.task("nli").id,
                                     label_map={"0": "entailment", "1": "neutral", "2": "contradiction"})
    from app.core.domain import ModelOutput
    from app.core.services.examples import Content

    desk.examples.create(author.id, "nli", Content({"context": "A man plays a guitar.", "hypothesis": "Nobody plays."},
                                                   "contradiction", meta={"label_explanation": "someone plays"}),
                         [ModelOutput(nli_model.id, nli_model.sha256, "neutral",
                                      {"entailment": 0.2, "neutral": 0.5, "contradiction": 0.3}, 1.0)])
    out["nli"] = Kind("nli", "nli", 1, written=1, fooled=1)
    anli = csv_slice(shared_file("anli", "ANLI_analysis_r1_dev.csv"), tmp / "anli.csv", 7)
    import_file(desk, anli, "anli", round_number=2)
    out["anli"] = Kind("anli", "nli", 2, imported=7, data_set="anli")

    from app.core.domain import Span

    qa = desk.models.register("qa model", "hf-torch", "ef" * 32, task_id=desk.tasks.task("extractive_qa").id)
    context = "The bridge was finished in 1932 by a crew of four hundred."
    desk.examples.create(author.id, "extractive_qa",
                         Content({"context": context, "question": "How many built the bridge?"}, None,
                                 Span(context.index("four hundred"), context.index("four hundred") + 12,
                                      "four hundred"), meta={}),
                         [ModelOutput(qa.id, qa.sha256, "The", {}, 1.0, answer=Span(0, 3, "The"))])
    out["qa"] = Kind("qa", "extractive_qa", 1, written=1, fooled=1)

    desk.dashboard.refresh(thorough=True)
    jsonl = tmp / "all.jsonl"
    export(desk, jsonl, "jsonl", keep_identities=True)
    second = Desk(tmp / "second")
    import_file(second, jsonl, "jsonl")
    yield desk, second, out, validator, tmp
    desk.close()
    second.close()


def dynahate_rows() -> int:
    with open(FIXTURES / "dynahate_sample.csv", newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def by_round(desk: Desk, kind: Kind):
    round_ = desk.tasks.round(kind.task, kind.round)
    return [f for f in desk.stats.figures("round") if f.key == str(round_.id)]


@pytest.mark.parametrize("name", ["written", "perturbation pair", "returned then revised", "retracted", "pulled",
                                  "hatecheck round", "dynahate", "nli", "anli", "qa"])
def test_stats_every_grouping(kinds, name):
    desk, second, kinds_, _, _ = kinds
    kind = kinds_[name]
    rows = by_round(desk, kind)
    if kind.written + kind.imported == 0:  # only retracted examples: nothing counts, the round has no row
        assert rows == []
    else:
        [row] = rows
        assert (row.submitted, row.imported, row.fooled, row.validated_fooling) == (
            kind.written, kind.imported, kind.fooled, 0)
        assert row.mer == (kind.fooled / kind.written if kind.written else None)
    task_id = desk.tasks.task(kind.task).id
    in_task = [k for k in kinds_.values() if k.task == kind.task]
    for by in GROUPINGS:  # every grouping adds up to the task's hand count (per model: examples with outputs)
        figures = desk.stats.figures(by, task_id=task_id)
        counted = [k for k in in_task if k.outputs or by != "model"]
        if by != "model" and kind.task == HATE:  # DynaHate's other rounds
            counted.append(Kind("dynahate, later rounds", HATE, None, imported=dynahate_rows() - kinds_["dynahate"].imported))
        assert sum(f.submitted for f in figures) == sum(k.written for k in counted), by
        assert sum(f.imported for f in figures) == sum(k.imported for k in counted), by
        assert sum(f.fooled for f in figures) == sum(k.fooled for k in in_task), by
    # the JSONL round trip: the second desk counts the same
    assert [(f.submitted, f.imported, f.fooled) for f in by_round(second, kind)] == [
        (f.submitted, f.imported, f.fooled) for f in rows]


@pytest.mark.parametrize("name", ["written", "perturbation pair", "returned then revised", "retracted", "pulled",
                                  "hatecheck round", "dynahate", "anli", "nli", "qa"])
def test_dashboard_review_and_next_round_counts(kinds, name):
    from app.core.services.next_round import round_counts

    desk, _, kinds_, validator, _ = kinds
    kind = kinds_[name]
    round_ = desk.tasks.round(kind.task, kind.round)
    task_id = desk.tasks.task(kind.task).id
    view = desk.dashboard.view(DashboardFilter(task_id=task_id), breakdown="round")
    [group] = [g for g in view.breakdowns["round"] if g.key == round_.id.hex] or [None]
    if kind.non_draft == 0:
        assert group is None
    else:
        assert (group.submitted, group.imported, group.fooled, group.retracted) == (
            kind.written, kind.imported, kind.fooled, kind.retracted)
    # Review's figures for the round: every example that is not a draft
    summary = desk.review.summary(ExampleFilter(task_id=task_id, round_ids=[round_.id]))
    assert summary["examples"] == kind.non_draft
    # the Validate queue: the round's examples that count, written or imported (none is the validator's)
    queued = desk.validation.queue(validator.id, task_code=kind.task, round_id=round_.id, limit=100)
    assert len(queued) == kind.written + kind.imported
    # training from the desk: the door names the tasks it does not take, in one sentence
    from app.core.services.training_data import TrainingDataError, training_set

    if kind.task == "extractive_qa":
        with pytest.raises(TrainingDataError) as refused:
            training_set(desk, kind.task, [kind.round])
        assert str(refused.value) == ("The task 'extractive_qa' is extractive QA: training from the desk trains "
                                      "classification heads only, not the span head (answer start and end "
                                      "positions) a QA model needs.")
    else:  # classification, single texts or (context, hypothesis) pairs alike
        data = training_set(desk, kind.task, [kind.round], include_undecided=True,
                            imported=[kind.data_set] if kind.data_set else [])
        taken = len(data.train) + len(data.held_out)
        assert taken == kind.written + kind.imported - len(data.duplicates), (data.excluded, data.duplicates)
        assert all(isinstance(e.text, tuple) == (kind.task == "nli") for e in data.train + data.held_out)
    if kind.task == "extractive_qa":
        return
    # the Next-round dialog's counts: undecided written examples; imported ones by data set
    [count] = [c for c in round_counts(desk, kind.task) if c.number == kind.round]
    assert count.undecided == kind.written and count.decided == 0 and count.left_out == 0
    assert dict(count.imported) == ({kind.data_set: kind.imported} if kind.imported else {})


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "hf"])
def test_export_holds_every_kind(kinds, fmt):
    from app.core.io.exporters import export

    desk, _, kinds_, _, tmp = kinds
    out = tmp / f"export-{fmt}"
    report = export(desk, out, fmt, task_code=HATE)
    hate = [k for k in kinds_.values() if k.task == HATE]
    dynahate_later = dynahate_rows() - kinds_["dynahate"].imported  # DynaHate's rounds after the first
    expected = sum(k.non_draft for k in hate) + dynahate_later
    if fmt == "jsonl":
        records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        examples = [r for r in records if r["record"] == "example"]
        assert len(examples) == expected
        assert sum(r.get("source") is not None for r in examples) == sum(k.imported for k in hate) + dynahate_later
    elif fmt == "csv":
        with open(out, newline="", encoding="utf-8") as handle:
            assert len(list(csv.DictReader(handle))) == expected
    else:
        assert report.counts["examples"] == expected, report.counts


def test_a_suite_is_not_an_example_and_the_stats_command_says_so(kinds):
    """The HateCheck suite is test cases: no door that counts examples counts it, and `stats` says why."""
    from click.testing import CliRunner

    from app.cli.desk import cli

    desk, _, _, _, tmp = kinds
    result = CliRunner().invoke(cli, ["--data-dir", str(desk.root), "stats", "--task", HATE])
    assert result.exit_code == 0, result.output
    assert ("HateCheck suites are test cases, not examples: `dynadesk eval --suite` scores a model on them; "
            "they are not counted here.") in result.output
    assert "Imported examples were not written against the target model" in result.output
