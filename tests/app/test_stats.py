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

    rows = [("submitted", True, "correct"), ("flagged", True, "incorrect"), ("submitted", False, "correct"),
            ("retracted", True, "correct"), ("submitted", None, None), ("flagged", True, None)]
    counted = [r for r in rows if figures.is_submitted(r[0])]
    fooled = sum(figures.is_fooling(f) for _, f, _ in counted)
    validated = sum(figures.is_validated_fooling(f, v) for _, f, v in counted)
    assert (len(counted), fooled, validated) == (5, 3, 1)
    assert figures.mer(fooled, len(counted)) == 3 / 5 and figures.vmer(validated, len(counted)) == 1 / 5
    assert figures.mer(0, 0) is None and figures.vmer(0, 0) is None

    status = np.array([STATUS_CODES[s] for s, _, _ in rows], dtype=np.int8)
    fooled_codes = np.array([-1 if f is None else int(f) for _, f, _ in rows], dtype=np.int8)
    decided = np.array([DECIDED_CODES[v] for _, _, v in rows], dtype=np.int8)
    mask = figures.submitted_mask(status, STATUS_CODES)
    fooling = figures.fooling_mask(fooled_codes) & mask
    assert (mask.sum(), fooling.sum(), figures.validated_mask(fooling, decided, DECIDED_CODES).sum()) == (5, 3, 1)
    rates = figures.rates(np.array([3, 0]), np.array([5, 0]))
    assert rates[0] == 3 / 5 and np.isnan(rates[1])
