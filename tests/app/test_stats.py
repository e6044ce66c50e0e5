import pytest

from tests.conftest import hate_content, hate_output


def test_mer_and_vmer_by_round_annotator_model_and_task(desk, people, target_model):
    second = desk.models.register("second", "onnx", "cd" * 32)
    round2 = desk.tasks.get_or_create_round("hate_speech", 2)

    def submit(author, label, first, other, round_number=1):
        return desk.examples.create(author.id, "hate_speech", hate_content("t", label),
                                    [hate_output(target_model, first), hate_output(second, other)],
                                    round_number=round_number)

    # Ana: 3 in round 1; two fool the ensemble (mean of two members that both say the wrong label)
    a1 = submit(people.author, "hate", "not hate", "not hate")
    a2 = submit(people.author, "hate", "not hate", "not hate")
    submit(people.author, "hate", "hate", "hate")
    # Vic: 2 in round 2; one fools; one retracted (not counted)
    v1 = submit(people.val1, "not hate", "hate", "hate", round_number=2)
    v2 = submit(people.val1, "not hate", "not hate", "hate", round_number=2)
    desk.examples.retract(v2.id, people.val1.id)
    # Validation: a1 validated correct (genuinely fooling), a2 decided incorrect, v1 correct by a lead
    for validator in (people.val1, people.val2, people.val3):
        desk.validation.validate(a1.id, validator.id, "correct")
        desk.validation.validate(a2.id, validator.id, "incorrect", corrected_label="not hate", reason="not hate")
    desk.validation.validate(v1.id, people.lead.id, "correct", mode="lead")

    by_annotator = {f.name: f for f in desk.stats.figures("annotator")}
    ana, vic = by_annotator["Ana Author"], by_annotator["Vic Validator"]
    assert (ana.submitted, ana.fooled, ana.validated_fooling) == (3, 2, 1)
    assert ana.mer == pytest.approx(2 / 3) and ana.vmer == pytest.approx(1 / 3)
    assert (vic.submitted, vic.fooled, vic.validated_fooling) == (1, 1, 1)

    by_round = {f.name: f for f in desk.stats.figures("round")}
    assert (by_round["Hate speech · round 1"].submitted, by_round["Hate speech · round 2"].fooled) == (3, 1)
    assert desk.stats.figures("round", round_id=round2.id)[0].submitted == 1

    by_model = {f.name: f for f in desk.stats.figures("model")}
    # first member wrong on a1, a2, v1; second member wrong on a1, a2, v1 (v2 is retracted)
    assert (by_model["test hate model"].submitted, by_model["test hate model"].fooled) == (4, 3)
    assert (by_model["second"].fooled, by_model["second"].validated_fooling) == (3, 2)

    [task] = desk.stats.figures("task")
    assert (task.submitted, task.fooled, task.validated_fooling) == (4, 3, 2)
    assert task.mer == pytest.approx(0.75) and task.vmer == pytest.approx(0.5)
    assert desk.stats.figures("task", task_id=desk.tasks.task("nli").id) == []
    assert desk.stats.figures("model", task_id=desk.tasks.task("nli").id) == []
    [only_round2] = [f for f in desk.stats.figures("model", round_id=round2.id) if f.name == "second"]
    assert (only_round2.submitted, only_round2.fooled, only_round2.validated_fooling) == (1, 1, 1)


def test_one_definition_of_mer_and_vmer_in_python_and_numpy():
    """app.core.tasks.figures: the rule by row, over numpy codes (the dashboard's) and as a ratio."""
    import numpy as np

    from app.core.services.dashboard_snapshot import DECIDED_CODES, STATUS_CODES
    from app.core.tasks import figures

    # the last row is an imported case: counted apart, never in MER or vMER
    rows = [("submitted", True, "correct", None), ("flagged", True, "incorrect", None),
            ("submitted", False, "correct", None), ("retracted", True, "correct", None), ("submitted", None, None, None),
            ("flagged", True, None, None), ("submitted", True, "correct", "hatecheck")]
    counted = [r for r in rows if figures.is_submitted(r[0], r[3])]
    fooled = sum(figures.is_fooling(f) for _, f, _, _ in counted)
    validated = sum(figures.is_validated_fooling(f, v) for _, f, v, _ in counted)
    assert (len(counted), fooled, validated) == (5, 3, 1)
    assert sum(figures.is_imported(s, source) for s, _, _, source in rows) == 1
    assert figures.mer(fooled, len(counted)) == 3 / 5 and figures.vmer(validated, len(counted)) == 1 / 5
    assert figures.mer(0, 0) is None and figures.vmer(0, 0) is None

    status = np.array([STATUS_CODES[s] for s, _, _, _ in rows], dtype=np.int8)
    fooled_codes = np.array([-1 if f is None else int(f) for _, f, _, _ in rows], dtype=np.int8)
    decided = np.array([DECIDED_CODES[v] for _, _, v, _ in rows], dtype=np.int8)
    imported = np.array([source is not None for *_, source in rows])
    mask = figures.submitted_mask(status, STATUS_CODES, imported)
    assert figures.imported_mask(status, STATUS_CODES, imported).sum() == 1
    fooling = figures.fooling_mask(fooled_codes) & mask
    assert (mask.sum(), fooling.sum(), figures.validated_mask(fooling, decided, DECIDED_CODES).sum()) == (5, 3, 1)
    rates = figures.rates(np.array([3, 0]), np.array([5, 0]))
    assert rates[0] == 3 / 5 and np.isnan(rates[1])


def csv_slice(source, out, n: int):
    """The header and the first ``n`` rows of a shared CSV, written at test time (never committed)."""
    import csv

    with open(source, newline="", encoding="utf-8") as f_in, open(out, "w", newline="", encoding="utf-8") as f_out:
        reader, writer = csv.reader(f_in), csv.writer(f_out)
        for i, row in enumerate(reader):
            if i > n:
                break
            writer.writerow(row)
    return out


def test_every_grouping_after_an_anli_import_and_an_undecided_fooling_example(desk, people, target_model, submit,
                                                                             tmp_path):
    """A model's examples all fooling and none decided summed to NULL (an unexpected TypeError in
    `stats`); imported examples count apart from MER and vMER."""
    from app.core.io.importers import import_file
    from app.core.services.stats import GROUPINGS
    from tests.conftest import shared_file

    anli = csv_slice(shared_file("anli", "ANLI_analysis_r1_dev.csv"), tmp_path / "anli.csv", 12)
    import_file(desk, anli, "anli")
    submit()  # written on the desk, fooled its target, nobody decided it yet
    for by in GROUPINGS:
        rows = desk.stats.figures(by)
        assert rows, by
        assert sum(f.submitted for f in rows) == 1 and sum(f.fooled for f in rows) == 1, by
        assert sum(f.imported for f in rows) == 12 and sum(f.validated_fooling for f in rows) == 0, by
    nli = desk.tasks.task("nli").id
    [task] = desk.stats.figures("task", task_id=nli)
    assert (task.submitted, task.imported, task.mer, task.vmer) == (0, 12, None, None)
    [model] = desk.stats.figures("model", task_id=nli)
    assert (model.name, model.imported, model.fooled) == ("ANLI round-1 adversary", 12, 0)
    [hate] = desk.stats.figures("model", task_id=desk.tasks.task("hate_speech").id)
    assert (hate.submitted, hate.fooled, hate.validated_fooling, hate.mer) == (1, 1, 0, 1.0)


def test_the_stats_command_after_anli_and_jsonl_imports(tmp_path):
    from click.testing import CliRunner

    from app.cli.desk import cli
    from tests.conftest import shared_file

    anli = csv_slice(shared_file("anli", "ANLI_analysis_r1_dev.csv"), tmp_path / "anli.csv", 8)
    runner = CliRunner()
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    for args in (["import", "--format", "anli", str(anli)], ["stats"], ["stats", "--task", "nli"],
                 ["export", str(tmp_path / "out.jsonl"), "--format", "jsonl"]):
        result = runner.invoke(cli, ["--data-dir", first, *args])
        assert result.exit_code == 0, result.output
    assert "not written against the target model" in result.output or args[0] == "export"
    for args in (["import", "--format", "jsonl", str(tmp_path / "out.jsonl")], ["stats"], ["stats", "--task", "nli"]):
        result = runner.invoke(cli, ["--data-dir", second, *args])
        assert result.exit_code == 0, result.output
    assert "ANLI round-1 adversary" in result.output and "Unexpected error" not in result.output
