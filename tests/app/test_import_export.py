import collections
import csv
import json
import shutil

import pytest
from sqlalchemy import func, select

from app.core.desk import Desk
from app.core.errors import DynadeskError, ImportFailed
from app.core.io.exporters import export
from app.core.io.importers import import_file
from app.core.services.review import ExampleFilter
from app.core.storage.models import Context, Example, Person, Suite, SuiteCase, Validation
from tests.conftest import FIXTURES, hate_content, hate_output, shared_file

DYNAHATE = FIXTURES / "dynahate_sample.csv"


def count(desk, model) -> int:
    with desk.db.read() as session:
        return session.scalar(select(func.count()).select_from(model))


def test_hatecheck_imports_as_a_functional_suite(desk):
    path = shared_file("hatecheck", "test_suite_cases_dev.csv")
    report = import_file(desk, path, "hatecheck")
    assert report.added == {"suites": 1, "suite cases": 2297}
    with desk.db.read() as session:
        suite = session.scalars(select(Suite)).one()
        cases = session.scalars(select(SuiteCase).where(SuiteCase.suite_id == suite.id)).all()
    by_gold = collections.Counter(c.gold_label for c in cases)
    assert by_gold == {"hate": 1460, "not hate": 837}
    assert len({c.functionality for c in cases}) >= 20
    first = min(cases, key=lambda c: c.position)
    assert (first.case_id, first.text, first.functionality, first.target) == (
        "1", "I hate women.", "derog_neg_emote_h", "women")
    assert first.extra["case_templ"] == "I hate [IDENTITY_P]."
    again = import_file(desk, path, "hatecheck")
    assert again.added == {} and again.already_present == 2297
    assert count(desk, SuiteCase) == 2297


def test_anli_imports_into_nli_keeping_reasons_and_the_adversarys_output(desk):
    path = shared_file("anli", "ANLI_analysis_r1_dev.csv")
    report = import_file(desk, path, "anli")
    assert report.added["examples"] == 1000 and report.added["contexts"] == 844  # two differ only in spacing
    with path.open(encoding="utf-8") as handle:
        first = next(csv.DictReader(handle))
    rows = desk.review.rows(ExampleFilter(task_id=desk.tasks.task("nli").id, text=first["statement"][:40]))
    example = desk.examples.get(rows[0].id)
    assert example.inputs == {"context": first["context"], "hypothesis": first["statement"]}
    assert example.true_label == {"e": "entailment", "n": "neutral", "c": "contradiction"}[first["gold_label"]]
    assert example.meta["label_explanation"] == first["reason"].strip()
    assert example.outputs[0].label == {"e": "entailment", "n": "neutral", "c": "contradiction"}[first["adversary_pred"]]
    assert example.model_fooled is True and example.origin["uid"] == first["uid"]
    with desk.db.read() as session:
        context = session.get(Context, example.context_id)
    assert context.text == first["context"].strip() and context.times_used >= 1
    assert import_file(desk, path, "anli").already_present == 1000
    assert count(desk, Example) == 1000


def test_dynahate_links_perturbations_to_their_originals(desk):
    report = import_file(desk, DYNAHATE, "dynahate")
    assert report.added["examples"] == 10 and report.added["perturbation links"] == 3
    assert report.added["rounds"] == 3  # rounds 2, 3, 4 join the existing round 1
    with desk.db.read() as session:
        by_external = {e.external_id: e for e in session.scalars(select(Example))}
        people = {p.display_name for p in session.scalars(select(Person))}
    original, perturbation = by_external["acl1"], by_external["acl2"]
    assert perturbation.perturbation_of == original.id and original.perturbation_of is None
    assert perturbation.edit_distance == 2 and perturbation.true_label == "not hate"
    assert original.meta == {"hate_type": "dehumanization", "target_groups": ["immigrants"]}
    assert by_external["acl6"].meta["target_groups"] == ["black people", "refugees"]
    assert by_external["acl8"].meta == {"hate_type": "support for hateful entities"}  # target not given
    assert by_external["acl10"].meta == {"target_groups": ["asi"]}  # unknown codes kept as free text
    assert by_external["acl9"].text == "هذا نص عادي تماما"
    assert by_external["acl3"].origin["round"] == "2a" and by_external["acl3"].origin["split"] == "dev"
    assert {"DynaHate annotator GNZ1", "DynaHate annotator VDS7", "DynaHate annotator QXA2"} <= people
    rounds = {r.number for r in desk.tasks.rounds("hate_speech")}
    assert rounds == {1, 2, 3, 4}


def test_a_malformed_row_stops_the_import_and_names_its_line(desk, tmp_path):
    bad = tmp_path / "bad.csv"
    lines = DYNAHATE.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace(",hate,", ",maybe,")
    lines[6] = lines[6].replace(",original,", ",remix,")
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ImportFailed) as caught:
        import_file(desk, bad, "dynahate")
    assert [(p.line, p.reason) for p in caught.value.problems] == [
        (4, "label 'maybe' is neither 'hate' nor 'nothate'"),
        (7, "level 'remix' is neither 'original' nor 'perturbation'"),
    ]
    assert "line 4" in str(caught.value) and "--skip-bad-rows" in str(caught.value)
    assert count(desk, Example) == 0 and len(desk.tasks.rounds("hate_speech")) == 1  # nothing went in

    report = import_file(desk, bad, "dynahate", skip_bad_rows=True)
    assert report.added["examples"] == 8 and [p.line for p in report.problems] == [4, 7]
    assert "Skipped 2 bad row(s)" in report.summary()


def test_bad_files_get_clear_messages(desk, tmp_path):
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("context,statement\ncaf\xe9,x\n".encode("latin-1"))
    with pytest.raises(DynadeskError, match="line 2: the file is not UTF-8"):
        import_file(desk, latin1, "anli")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DynadeskError, match="not a anli file; it lacks the column"):
        import_file(desk, empty, "anli")
    with pytest.raises(DynadeskError, match="Unknown import format 'xml'"):
        import_file(desk, empty, "xml")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"record": "person", "id": "not-a-uuid"}\n{oops\n[1]\n{"record": "planet", "id": 1}\n')
    with pytest.raises(ImportFailed) as caught:
        import_file(desk, broken, "jsonl")
    reasons = {p.line: p.reason for p in caught.value.problems}
    assert "needs an 'id' that is a UUID" in reasons[1]
    assert reasons[2].startswith("not valid JSON")
    assert "must be a JSON object" in reasons[3]
    assert "unknown record kind 'planet'" in reasons[4]


@pytest.fixture
def collected(desk, people, target_model):
    """Two rounds of work: examples, a perturbation, validations and a retraction."""
    desk.tasks.get_or_create_round("hate_speech", 2)
    original = desk.examples.create(people.author.id, "hate_speech", hate_content("Women are useless 🙄", "hate"),
                                    [hate_output(target_model, "not hate")], time_spent_ms=42_000,
                                    round_number=1)
    draft = desk.examples.start_draft(people.author.id, "hate_speech", 1, perturbation_of=original.id)
    pair = desk.examples.submit(draft.id, [hate_output(target_model, "hate")],
                                hate_content("Women are useful 🙄", "not hate"))
    later = desk.examples.create(people.val1.id, "hate_speech", hate_content("مرحبا بكم", "not hate"),
                                 [hate_output(target_model, "hate")], round_number=2)
    gone = desk.examples.create(people.author.id, "hate_speech", hate_content("oops", "not hate"), round_number=1)
    desk.examples.retract(gone.id, people.author.id, "typo")
    for validator in (people.val1, people.val2):
        desk.validation.validate(original.id, validator.id, "correct")
    desk.validation.validate(later.id, people.author.id, "incorrect", corrected_label="hate", reason="it is")
    desk.examples.start_draft(people.author.id, "hate_speech")  # drafts stay home
    return {"original": original, "pair": pair, "later": later, "gone": gone}


def test_a_jsonl_round_trip_reproduces_the_data(desk, collected, tmp_path):
    path = tmp_path / "out.jsonl"
    report = export(desk, path, "jsonl", keep_identities=True)
    assert report.counts["example"] == 4 and report.counts["validation"] == 3
    with Desk(tmp_path / "fresh") as fresh:
        imported = import_file(fresh, path, "jsonl")
        assert imported.problems == []
        for key in ("original", "pair", "later", "gone"):
            a, b = desk.examples.get(collected[key].id), fresh.examples.get(collected[key].id)
            for column in ("inputs", "text", "true_label", "meta", "model_fooled", "status", "status_reason",
                           "perturbation_of", "edit_ops", "edit_distance", "time_spent_ms", "submitted_at",
                           "created_at", "revision", "validation_state", "validation_count", "decided_verdict",
                           "decided_label", "author_id", "fooled_rule"):
                assert getattr(a, column) == getattr(b, column), (key, column)
            assert [(o.model_sha256, o.label, o.probabilities, o.latency_ms, o.fooled) for o in a.outputs] == [
                (o.model_sha256, o.label, o.probabilities, o.latency_ms, o.fooled) for o in b.outputs]
            assert sorted((v.validator_id, v.verdict, v.corrected_label) for v in a.validations) == sorted(
                (v.validator_id, v.verdict, v.corrected_label) for v in b.validations)
        assert {r.number for r in fresh.tasks.rounds("hate_speech")} == {1, 2}
        assert fresh.stats.figures("annotator") == desk.stats.figures("annotator")
        assert import_file(fresh, path, "jsonl").added == {}  # a second import adds nothing


def test_exports_replace_people_by_salted_per_round_pseudonyms(desk, people, collected, tmp_path):
    path = tmp_path / "pseudo.jsonl"
    export(desk, path, "jsonl", salt="team-secret")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    names = {r["display_name"] for r in records if r["record"] == "person"}
    assert not names & {"Ana Author", "Vic Validator", "Wen Validator"}
    assert all(name.startswith("annotator-") for name in names)
    text = path.read_text(encoding="utf-8")
    assert str(people.author.id) not in text and "Ana Author" not in text
    by_id = {r["id"]: r for r in records}
    authors = {by_id[r["id"]]["author"] for r in records if r["record"] == "example"
               and r["id"] in (str(collected["original"].id), str(collected["pair"].id))}
    assert len(authors) == 1  # the same person in the same round keeps one pseudonym
    # Vic wrote in round 2 and validated in round 1: two different pseudonyms
    vic_round2 = next(r["author"] for r in records if r["record"] == "example" and r["id"] == str(collected["later"].id))
    vic_round1 = next(r["validator"] for r in records if r["record"] == "validation"
                      and r["example"] == str(collected["original"].id) and r["validator"] != vic_round2)
    assert vic_round1 != vic_round2
    again = tmp_path / "again.jsonl"
    export(desk, again, "jsonl", salt="team-secret")
    assert again.read_text(encoding="utf-8") == text  # the same salt gives the same pseudonyms
    with Desk(tmp_path / "fresh") as fresh:
        assert import_file(fresh, path, "jsonl").added["examples"] == 4


def test_csv_export_is_flat_and_complete(desk, collected, tmp_path):
    path = tmp_path / "hate.csv"
    export(desk, path, "csv", task_code="hate_speech")
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    original = next(r for r in rows if r["id"] == str(collected["original"].id))
    assert (original["text"], original["label"], original["hate_type"], original["target_groups"]) == (
        "Women are useless 🙄", "hate", "derogation", "women")
    assert original["model_fooled"] == "True" and original["author"].startswith("annotator-")
    pair = next(r for r in rows if r["id"] == str(collected["pair"].id))
    assert pair["perturbation_of"] == str(collected["original"].id) and pair["edit_distance"] == "1"


def test_hf_export_loads_with_the_datasets_library(desk, collected, tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "hf"
    export(desk, folder, "hf", task_code="hate_speech")
    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))
    assert set(loaded) == {"round1", "round2"}
    assert loaded["round1"].num_rows == 3 and loaded["round2"].num_rows == 1
    row = next(r for r in loaded["round1"] if r["id"] == str(collected["original"].id))
    assert row["label"] == "hate" and row["label_id"] == 0 and row["target_groups"] == ["women"]
    assert loaded["round2"][0]["text"] == "مرحبا بكم"
    assert loaded["round1"].features["target_groups"].feature.dtype == "string"
    assert "Content warning" in (folder / "README.md").read_text(encoding="utf-8")


def test_csv_export_needs_a_task(desk, tmp_path):
    with pytest.raises(DynadeskError, match="holds one task"):
        export(desk, tmp_path / "x.csv", "csv")
    assert count(desk, Validation) == 0


def _hatecheck_file(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["functionality", "case_id", "templ_id", "test_case", "label_gold", "target_ident"])
        writer.writerows(rows)
    return path


def test_hatecheck_cases_import_as_a_rounds_examples_grouped_by_template_against_its_target(
        desk, people, hate_trigger_model_dir, tmp_path):
    """--round makes the cases examples of that round with the target's answers; --group-column keeps each
    template on one side of the held-out split, in training data and in the comparison's round cases."""
    from app.core.next_round.training_data import training_set
    from app.core.services.evaluation_data import round_sets
    from app.core.services.target_models import register_model
    from app.core.tasks.splits import is_held_out

    model_dir = tmp_path / "target"
    shutil.copytree(hate_trigger_model_dir, model_dir)
    target = register_model(desk, model_dir, name="banana detector", task_code="hate_speech")
    desk.rounds.set_models(desk.tasks.round("hate_speech", 1).id, people.lead.id, [target.id])
    rows = [("derog_h", str(n), str(n // 4), f"{'a banana ' if n % 2 else ''}case {n} of template {n // 4}",
             "hateful" if n % 3 else "non-hateful", "women") for n in range(240)]
    path = _hatecheck_file(tmp_path / "cases.csv", rows)
    report = import_file(desk, path, "hatecheck", round_number=1, group_column="templ_id")
    assert report.added["examples"] == 240 and "suites" not in report.added, report.summary()
    data = training_set(desk, "hate_speech", [1], imported=["hatecheck"])
    by_id = {e.id: e for e in data.train + data.held_out}
    side = {}
    with desk.db.read() as session:
        stored = {str(e.id): e for e in session.scalars(select(Example))}
        outputs = {i: [o.label for o in e.outputs] for i, e in stored.items()}
    for example_id, example in stored.items():
        template = example.origin["templ_id"]
        assert example.origin["group"] == f"templ_id={template}"
        assert outputs[example_id] == ["hate" if "banana" in example.text else "not hate"]
        assert example.model_fooled == (example.true_label != outputs[example_id][0])
        held = any(e.id == example_id for e in data.held_out)
        assert side.setdefault(template, held) == held, f"template {template} is on both sides"
        assert held == is_held_out(example.id, group=f"templ_id={template}")
    assert 0 < sum(side.values()) < len(side) and len(by_id) == 240
    cases = round_sets(desk, "hate_speech", [1], include_unvalidated=True)[0].cases
    assert {c.extra["group"] for c in cases} == {f"templ_id={n}" for n in range(60)}

    again = import_file(desk, path, "hatecheck", round_number=1, group_column="templ_id")
    assert again.already_present == 240 and not again.added


def test_a_missing_or_empty_group_column_is_refused_with_what_to_do(desk, tmp_path):
    path = _hatecheck_file(tmp_path / "cases.csv", [("derog_h", "1", "", "some case", "hateful", "")])
    with pytest.raises(DynadeskError, match="no column 'template'.*columns are functionality"):
        import_file(desk, path, "hatecheck", round_number=1, group_column="template")
    with pytest.raises(ImportFailed) as failed:
        import_file(desk, path, "hatecheck", round_number=1, group_column="templ_id")
    assert "templ_id is empty" in str(failed.value)


def test_hatecheck_round_examples_imported_before_the_target_runs_get_its_answers_on_a_second_import(
        desk, tmp_path, hate_trigger_model_dir):
    """Imported before the round had a target (a desk's first start), the cases are stored without model
    outputs; importing the file again once the target runs fills them in, and adds no example."""
    from app.core.io.importers import import_file
    from app.core.services.target_models import register_model
    from app.core.storage.models import Example
    from tests.app.test_stats import csv_slice
    from tests.conftest import shared_file

    cases = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp_path / "hatecheck.csv", 7)
    first = import_file(desk, cases, "hatecheck", round_number=1, group_column="templ_id")
    assert first.added["examples"] == 7 and "import the file again" in " ".join(first.warnings)
    with desk.db.read() as session:
        assert all(not e.outputs and e.model_fooled is None for e in session.query(Example))
    target = register_model(desk, hate_trigger_model_dir, task_code="hate_speech", name="Trigger model")
    desk.rounds.adopt_first_models("hate_speech", [target.id])
    again = import_file(desk, cases, "hatecheck", round_number=1, group_column="templ_id")
    assert again.added == {"examples given their model outputs": 7} and again.already_present == 0
    with desk.db.read() as session:
        examples = list(session.query(Example))
        assert len(examples) == 7
        assert all([o.model_sha256 for o in e.outputs] == [target.sha256] and e.model_fooled is not None
                   for e in examples)
    assert import_file(desk, cases, "hatecheck", round_number=1, group_column="templ_id").already_present == 7
