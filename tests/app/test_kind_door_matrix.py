"""Every kind of data through every door of the desk (DESIGN.md §4.12), with figures checked against a hand count.

The kinds are built once for the module, each hate-speech kind in a round of its own (so a round's figures
are the kind's), and each door is run on every kind: stats (every grouping), the dashboard's tables (per
round and per annotator), the Review figures, the Validate queue, export (jsonl, csv, hf), the Next-round
counts and training set, the JSONL round trip onto a second desk, `eval --rounds` (and `--suite`),
`quality`, the leaderboard, the blur and the assistant (tiny models as the rounds' targets). Where a door
does not apply to a kind (a HateCheck suite is test cases, not examples; QA is not scored as a
classifier), the door says so in one sentence and the test checks it.

Sync's doors (publish, share-imported, push, pull on a second desk) run every kind through one server in
tests/sync/test_kind_sync_matrix.py.
"""

from __future__ import annotations

import csv
import json
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
def kinds(tmp_path_factory, tiny_classifier_dir):
    from app.core.io.exporters import export
    from app.core.io.importers import import_file

    tmp = tmp_path_factory.mktemp("matrix")
    desk, out, validator = build_kinds(tmp)
    attach_scoring_models(desk, tmp, tiny_classifier_dir)
    jsonl = tmp / "all.jsonl"
    export(desk, jsonl, "jsonl", keep_identities=True)
    second = Desk(tmp / "second")
    import_file(second, jsonl, "jsonl")
    yield desk, second, out, validator, tmp
    desk.close()
    second.close()


def build_kinds(tmp: Path, desk: Desk | None = None, *, pulled: bool = True,
                targets: bool = False) -> tuple[Desk, dict[str, Kind], object]:
    """A desk holding every kind, each hate-speech kind in a round of its own; (desk, kinds, validator).

    Given a ``desk``, its working person (an owner, say, of a team desk) writes and leads; ``pulled``:
    also an example pulled from another desk (a team's desks make that one by syncing); ``targets``: the
    models the examples were written against are their rounds' targets (what a team publishes)."""
    from app.core.io.importers import import_file
    from app.core.services.lead import REVISION

    if desk is None:
        desk = Desk(tmp / "desk")
        author = desk.people.create("Ana Author", "annotator")
        validator = desk.people.create("Vic Validator", "annotator")
        lead = desk.people.create("Lee Lead", "lead")
    else:
        author = lead = desk.current_person()
        validator = desk.people.create("Vic Validator", "annotator")
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
    if lead.id != author.id:  # on a team desk the lead returns it from their own desk, after a sync
        desk.lead.return_examples(lead.id, [returned.id], "say who is meant")
        write("returned by the lead, revised", round_number=12, origin={"kind": REVISION, "of": str(returned.id)})
        out["returned then revised"] = Kind("returned then revised", HATE, 12, written=2, fooled=2)

    gone = write("retracted by its author", round_number=13)
    desk.examples.retract(gone.id, author.id)
    out["retracted"] = Kind("retracted", HATE, 13, retracted=1)

    if pulled:
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
    from app.core.tasks.content import Content

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
    if targets:
        for task_code, record, numbers in ((HATE, model, (10, 11, 12, 13, 14, 15)), ("nli", nli_model, (1, 2)),
                                           ("extractive_qa", qa, (1,))):
            for number in numbers:
                desk.rounds.set_models(desk.tasks.round(task_code, number).id, lead.id, [record.id])

    desk.dashboard.refresh(thorough=True)
    return desk, out, validator


SCORING = {HATE: "matrix hate model", "nli": "matrix nli model"}  # tiny random models that run here


def attach_scoring_models(desk: Desk, tmp: Path, hate_dir: Path) -> None:
    """Tiny models with files as every kind's round target, for the doors that run a model (eval, the
    leaderboard, the assistant); the examples keep the outputs of the models they were written against."""
    from transformers import BertForSequenceClassification

    from app.core.services.target_models import register_model
    from tests.model_fixtures import save_tiny

    lead = next(p for p in desk.people.all() if p.role == "lead")
    nli_labels = ["entailment", "neutral", "contradiction"]
    nli_dir = save_tiny(BertForSequenceClassification, tmp / "tiny-nli", num_labels=3,
                        id2label=dict(enumerate(nli_labels)), label2id={l: i for i, l in enumerate(nli_labels)})
    for task, folder in ((HATE, hate_dir), ("nli", nli_dir)):
        record = register_model(desk, folder, name=SCORING[task], task_code=task)
        for round_ in desk.tasks.rounds(task):
            desk.rounds.set_models(round_.id, lead.id, [record.id])


def door(desk: Desk, *args: str) -> tuple[int, str]:
    """A `dynadesk` command on the desk's folder: (exit code, what it printed or the refusal's sentence).
    An error that is not the desk's own refusal fails the cell (the 'Unexpected error' the CLI prints)."""
    from click.testing import CliRunner

    from app.cli.desk import cli
    from app.core.errors import DynadeskError

    result = CliRunner().invoke(cli, ["--data-dir", str(desk.root), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        if isinstance(result.exception, DynadeskError):
            return 1, str(result.exception)
        raise result.exception
    return result.exit_code, result.output


def kind_examples(desk: Desk, kind: Kind):
    """The kind's examples that are not drafts, oldest first."""
    from sqlalchemy import select

    from app.core.storage.models import Example

    round_id = desk.tasks.round(kind.task, kind.round).id
    with desk.db.read() as session:
        return list(session.scalars(select(Example).where(Example.round_id == round_id, Example.status != "draft")
                                    .order_by(Example.created_at, Example.id)))


QA_REFUSALS = {
    "eval": "Extractive question answering is an extractive QA task; evaluation scores classifiers.",
    "leaderboard": "Extractive question answering is an extractive QA task; the leaderboard scores classifiers.",
    "suggest": "The assistant suggests edits for labelled tasks; 'extractive_qa' asks for an answer span. "
               "Write the question yourself.",
}
WITH_ROUNDS = ["written", "perturbation pair", "returned then revised", "retracted", "pulled", "hatecheck round",
               "dynahate", "nli", "anli", "qa"]


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
    from app.core.next_round.inputs import round_counts

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
    from app.core.next_round.training_data import TrainingDataError, training_set

    if kind.task == "extractive_qa":
        with pytest.raises(TrainingDataError) as refused:
            training_set(desk, kind.task, [kind.round])
        assert str(refused.value) == ("The task 'extractive_qa' is extractive QA: training from the desk trains "
                                      "classification heads only, not the span head (answer start and end "
                                      "positions) a QA model needs.")
        # `dynadesk train --task` says the same sentence
        assert door(desk, "train", "--task", kind.task, "--rounds", str(kind.round), "--out",
                    str(desk.root / "not-trained")) == (1, str(refused.value))
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


@pytest.fixture(scope="module")
def evaluated(kinds):
    """One `eval --rounds ... --include-unvalidated` per task over every kind's round (a model loads once):
    task -> (what it printed, its document)."""
    desk, _, kinds_, _, tmp = kinds
    out = {}
    for task in SCORING:
        numbers = sorted({k.round for k in kinds_.values() if k.task == task and k.round is not None})
        code, printed = door(desk, "eval", "--models", SCORING[task], "--task", task, "--rounds",
                             ",".join(map(str, numbers)), "--include-unvalidated", "--no-identity-swap",
                             "--no-robustness", "--out", str(tmp / f"eval-{task}"))
        assert code == 0, printed
        out[task] = printed, json.loads((tmp / f"eval-{task}" / "evaluation.json").read_text(encoding="utf-8"))
    return out


@pytest.mark.parametrize("name", WITH_ROUNDS)
def test_eval_rounds(kinds, evaluated, name):
    """`eval --rounds N --include-unvalidated`: the round's set holds its submitted examples, written or
    imported (a retracted one is not a case, and a round of none is left out, saying so); a QA task is
    refused in one sentence."""
    desk, _, kinds_, _, tmp = kinds
    kind = kinds_[name]
    if kind.task == "extractive_qa":
        assert door(desk, "eval", "--models", "default", "--task", kind.task, "--rounds", "1",
                    "--out", str(tmp / "eval-qa")) == (1, QA_REFUSALS["eval"])
        return
    printed, doc = evaluated[kind.task]
    [result] = doc["results"].values()
    cases = kind.written + kind.imported
    if cases == 0:
        assert f"Round {kind.round}: no submitted examples yet; left out" in printed
        assert f"round-{kind.round}" not in result["sets"]
        alone = door(desk, "eval", "--models", SCORING[kind.task], "--task", kind.task, "--rounds", str(kind.round),
                     "--include-unvalidated", "--out", str(tmp / "eval-none"))
        assert alone == (1, f"There is nothing to evaluate on: no submitted example in Round {kind.round}, and no "
                            "suite or data file was given.")
        return
    assert result["sets"][f"round-{kind.round}"]["n"] == cases


def test_eval_suite(kinds):
    """The HateCheck suite's door: `eval --suite` scores every case of it."""
    desk, _, _, _, tmp = kinds
    out = tmp / "eval-suite"
    code, printed = door(desk, "eval", "--models", SCORING[HATE], "--suite", str(tmp / "hatecheck.csv"),
                         "--no-identity-swap", "--no-robustness", "--out", str(out))
    assert code == 0, printed
    [result] = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))["results"].values()
    assert result["sets"]["suite"]["n"] == 6


@pytest.mark.parametrize("name", WITH_ROUNDS)
def test_quality(kinds, name):
    """`quality --round N`: the round's examples are its submitted ones, written or imported."""
    desk, _, kinds_, _, _ = kinds
    kind = kinds_[name]
    code, printed = door(desk, "quality", "--task", kind.task, "--round", str(kind.round), "--no-embeddings", "--json")
    assert code == 0, printed
    [round_] = json.loads(printed)["rounds"]
    assert (round_["round"], round_["examples"]) == (kind.round, kind.written + kind.imported)


@pytest.mark.parametrize("name", WITH_ROUNDS)
def test_leaderboard(kinds, name):
    """The leaderboard's column for the kind's round: no written example of the matrix is decided, so only
    imported examples (gold labels) count, and those on the held-out side are scored; with none, the board
    says so."""
    desk, _, kinds_, _, tmp = kinds
    kind = kinds_[name]
    board_file = tmp / f"board-{name}.json"
    code, printed = door(desk, "rounds", "leaderboard", "--task", kind.task, "--json", str(board_file))
    if kind.task == "extractive_qa":
        assert (code, printed) == (1, QA_REFUSALS["leaderboard"])
        return
    assert code == 0, printed
    board = json.loads(board_file.read_text(encoding="utf-8"))
    [column] = [c for c in board["columns"] if c["number"] == kind.round]
    held_out = held_out_by_hand(desk, kind)
    assert (column["n"], column["decided"], column["fooling"]) == (held_out, kind.imported, 0)
    if not held_out:
        assert "no held-out examples" in printed


def held_out_by_hand(desk: Desk, kind: Kind) -> int:
    """The kind's imported examples on the held-out side, each put to the split rule on its own."""
    from sqlalchemy import select

    from app.core.storage.models import Example
    from app.core.tasks.splits import held_out_example

    round_id = desk.tasks.round(kind.task, kind.round).id
    with desk.db.read() as session:
        rows = session.execute(select(Example.id, Example.perturbation_of, Example.origin)
                               .where(Example.round_id == round_id, Example.source.is_not(None))).all()
    return sum(held_out_example(i, p, o) for i, p, o in rows)


@pytest.mark.parametrize("name", [n for n in WITH_ROUNDS if n != "retracted"])
def test_the_blur(kinds, name):
    """Every text a reader sees of the kind (text, hypothesis and premise, question and passage) passes the
    blur: with a lead's blur words taken from those very texts, Review and Data show none of them."""
    from app.core.wellbeing.blur import lexicon_spans
    from app.core.wellbeing.profile import WellbeingProfile
    from app.gui.example_fetch import for_data_tab, for_review

    desk, _, kinds_, _, _ = kinds
    kind = kinds_[name]
    lead = next(p for p in desk.people.all() if p.role == "lead")
    before = desk.current_person_id
    examples = kind_examples(desk, kind)
    assert len(examples) == kind.non_draft
    desk.switch_person(lead.id)
    try:
        desk.settings.wellbeing = {str(lead.id): WellbeingProfile(blur_validating=True, blur_browsing=True)}
        shown = [t for e in examples for t in off_the_gui_thread(for_review, desk, e.id).detail.shown_texts]
        words = sorted({max((w.strip(".,?!'\"") for w in t.split()), key=len) for t in shown})
        desk.set_task_settings(lead.id, kind.task, blur_words=words)
        for example in examples:
            for detail in (off_the_gui_thread(for_review, desk, example.id).detail,
                           off_the_gui_thread(for_data_tab, desk, example.id)):
                assert detail.blur.masked and len(detail.blur.texts) == len(detail.shown_texts)
                for item in detail.blur.texts:
                    plain = item.text
                    for start, end in item.spans:  # ASCII texts: UTF-16 offsets are string offsets
                        plain = plain[:start] + "•" * (end - start) + plain[end:]
                    assert not lexicon_spans(plain, words), (example.text, plain)
                    assert item.spans, item.text  # each text held one of the words
    finally:
        desk.set_task_settings(lead.id, kind.task, blur_words=[])
        desk.switch_person(before)


def off_the_gui_thread(fetch, *args):
    """A reading view's fetch as its page runs it: on a worker thread, never Qt's main thread (which the
    suite's guard watches once any GUI test has made a QApplication in this process)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as worker:
        return worker.submit(fetch, *args).result()


@pytest.mark.parametrize("name", [n for n in WITH_ROUNDS if n != "retracted"])
def test_the_assistant(kinds, name):
    """`suggest` from the kind's first text, checked by the round's target: each suggestion's label is the
    target's own answer for it (a hand count through the model); a QA task is refused in one sentence."""
    from app.core.services.target_models import load_engine_for, model_input

    desk, _, kinds_, _, _ = kinds
    kind = kinds_[name]
    example = kind_examples(desk, kind)[0]
    context = (example.inputs or {}).get("context")
    args = ["suggest", "--task", kind.task, "--round", str(kind.round), "--top", "8", "--json", example.text]
    if context and kind.task != "extractive_qa":
        args += ["--context", context]
    code, printed = door(desk, *args)
    if kind.task == "extractive_qa":
        assert (code, printed) == (1, QA_REFUSALS["suggest"])
        return
    assert code == 0, printed
    doc = json.loads(printed)
    assert doc["models"] == [SCORING[kind.task]] and doc["checked"] >= len(doc["suggestions"])
    record = next(m for m in desk.models.all() if m.name == SCORING[kind.task])
    engine = load_engine_for(record)
    try:
        definition = desk.tasks.definition_by_code(kind.task)
        fields = {"context": context} if context else {}
        texts = [model_input(definition, {**fields, "text": s["text"], "hypothesis": s["text"]})
                 for s in doc["suggestions"]]
        answers = engine.predict(texts) if texts else []
    finally:
        engine.close()
    assert [s["predicted"] for s in doc["suggestions"]] == [a.label for a in answers]
    assert all(s["fools"] == (s["predicted"] != (s["claimed_label"] or doc["label"])) for s in doc["suggestions"])


@pytest.mark.parametrize("name", WITH_ROUNDS)
def test_dashboard_per_annotator(kinds, name):
    """The Dashboard's per-annotator table for the kind's round: each author's row counts their examples (a
    hand count from the stored authors), and someone who is not a lead sees their own row and the team's."""
    from collections import Counter

    desk, _, kinds_, _, _ = kinds
    kind = kinds_[name]
    round_ = desk.tasks.round(kind.task, kind.round)
    flt = DashboardFilter(task_id=desk.tasks.task(kind.task).id, round_ids=[round_.id])
    examples = kind_examples(desk, kind)
    counted = [e for e in examples if e.status != "retracted"]
    by_author = Counter(e.author_id.hex for e in counted)
    retracted = Counter(e.author_id.hex for e in examples if e.status == "retracted")
    view = desk.dashboard.view(flt)
    writers = {a.key: a for a in view.annotators if a.submitted + a.imported + a.retracted}
    assert {k: a.submitted + a.imported for k, a in writers.items()} == {
        k: by_author[k] for k in {*by_author, *retracted}}
    assert {k: a.retracted for k, a in writers.items() if a.retracted} == dict(retracted)
    assert sum(a.submitted for a in writers.values()) == kind.written
    assert sum(a.imported for a in writers.values()) == kind.imported
    assert sum(a.fooled for a in writers.values()) == kind.fooled
    author = examples[0].author_id
    own = desk.dashboard.view(flt, only_person=author)
    mine, team = own.annotators
    assert mine.key == author.hex and (mine.submitted, mine.imported) == (
        writers[author.hex].submitted, writers[author.hex].imported)
    assert (team.name, team.submitted, team.imported) == ("Team (everyone)", kind.written, kind.imported)
