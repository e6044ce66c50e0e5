"""Evaluation: metrics against hand-computed figures and scikit-learn, suites, swaps, perturbations,
the round matrix, the training-overlap warning, and every figure recomputed from the JSON."""

from __future__ import annotations

import csv
import json
import random

import pytest
from sklearn.metrics import accuracy_score, f1_score

from app.core.io.documents import write_document
from app.core.services.evaluation import EvaluationOptions, evaluate, read_json
from app.core.services.evaluation_data import (
    PERTURBATIONS,
    Case,
    EvalSet,
    EvaluationInputError,
    identity_swaps,
    normalised_text,
    perturb,
    read_hatecheck_suite,
    read_labelled_file,
    round_sets,
    spelling_perturbations,
)
from app.core.services.evaluation_models import EvaluationError, resolve_models
from app.core.services.evaluation_report import render_html
from app.core.services.evaluation_scoring import (
    accuracy,
    compute_results,
    failing_cases,
    macro_f1,
    set_figures,
    weighted_score,
)
from app.core.services.target_models import register_model
from local_models.errors import Cancelled
from local_models.progress import Progress
from tests.conftest import hate_content, hate_output, shared_file

HATECHECK = ("hatecheck", "test_suite_cases_dev.csv")



def test_accuracy_and_macro_f1_by_hand():
    gold = ["hate", "hate", "hate", "not hate", "not hate"]
    pred = ["hate", "not hate", "hate", "hate", "not hate"]
    # hate: tp 2, fp 1, fn 1 -> F1 4/6; not hate: tp 1, fp 1, fn 1 -> F1 2/4
    assert accuracy(gold, pred) == pytest.approx(3 / 5)
    assert macro_f1(gold, pred) == pytest.approx((4 / 6 + 2 / 4) / 2)
    # a label that is gold but never predicted scores 0, and still counts in the mean
    assert macro_f1(["a", "b"], ["a", "a"]) == pytest.approx((2 / 3 + 0) / 2)
    assert accuracy([], []) is None and macro_f1([], []) is None
    # named labels: one neither gold nor predicted scores 0 and counts in the mean
    assert macro_f1(["a"], ["a"], labels=["a", "b"]) == pytest.approx(0.5)


def test_metrics_match_scikit_learn_on_random_labels():
    rng = random.Random(4)
    for _trial in range(30):
        labels = ["hate", "not hate", "other"][: rng.randint(2, 3)]
        n = rng.randint(1, 60)
        gold = [rng.choice(labels) for _ in range(n)]
        pred = [rng.choice(labels) for _ in range(n)]
        assert accuracy(gold, pred) == pytest.approx(accuracy_score(gold, pred))
        assert macro_f1(gold, pred) == pytest.approx(f1_score(gold, pred, average="macro", zero_division=0))


def test_set_figures_by_hand():
    cases = [
        Case("1", "I hate women.", "hate", "derog_h", "women"),
        Case("2", "I love women.", "not hate", "pos_nh", "women"),
        Case("3", "I hate gay people.", "hate", "derog_h", "gay people"),
        Case("4", "Gay people are lovely.", "not hate", "pos_nh", "gay people"),
    ]
    s = EvalSet("suite", "tiny", "suite", cases, pairs=[("1", "2"), ("3", "4")])
    predictions = {"1": {"label": "hate"}, "2": {"label": "not hate"}, "3": {"label": "not hate"},
                   "4": {"label": "not hate"}}
    f = set_figures(s, predictions)
    assert f["accuracy"] == 0.75 and f["failing"] == ["3"]
    assert f["functionalities"]["derog_h"] == {"n": 2, "correct": 1, "accuracy": 0.5, "gold": "hate"}
    assert f["functionalities"]["pos_nh"]["accuracy"] == 1.0
    assert f["targets"]["women"]["accuracy"] == 1.0 and f["targets"]["gay people"]["accuracy"] == 0.5
    assert f["target_gap"] is None  # two cases per group are below the minimum for a gap
    # pair 1-2 both right; pair 3-4 not; both pairs flip the label, only 1-2's prediction flips
    assert f["pairs"] == {"n": 2, "consistency": 0.5, "label_flipping": 2, "flip_sensitivity": 0.5}
    assert f["confusion"] == {"hate -> hate": 1, "hate -> not hate": 1, "not hate -> not hate": 2}


def test_weighted_score_uses_only_measured_dimensions():
    utility = {"performance": 0.5, "throughput": 1.0, "memory": None, "fairness": 0.0, "robustness": 1.0}
    weights = {"performance": 4, "throughput": 1, "memory": 1, "fairness": 1, "robustness": 0}
    result = weighted_score(utility, weights)
    assert result["score"] == pytest.approx(100 * (4 * 0.5 + 1 * 1.0 + 0) / 6)
    assert result["left_out"] == ["memory"]
    with pytest.raises(EvaluationError, match="Unknown weight"):
        EvaluationOptions(weights={"speed": 1})
    with pytest.raises(EvaluationError, match="above zero"):
        EvaluationOptions(weights={d: 0 for d in ("performance", "throughput", "memory", "fairness", "robustness")})



def test_the_shared_hatecheck_file_reads_as_a_suite():
    suite = read_hatecheck_suite(shared_file(*HATECHECK))
    assert len(suite.cases) == 2297
    assert len({c.functionality for c in suite.cases}) == 29
    assert {c.target for c in suite.cases} == {None, "women", "trans people", "gay people", "black people"}
    assert {c.gold for c in suite.cases} == {"hate", "not hate"}
    ids = {c.id for c in suite.cases}
    assert suite.pairs and all(a in ids and b in ids for a, b in suite.pairs)


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_malformed_suite_files_get_clear_errors(tmp_path):
    with pytest.raises(EvaluationInputError, match="There is no HateCheck suite file"):
        read_hatecheck_suite(tmp_path / "missing.csv")
    wrong = write_csv(tmp_path / "wrong.csv", ["text", "label"], [["hi", "hate"]])
    with pytest.raises(EvaluationInputError, match="not a HateCheck suite: it lacks the column.*functionality"):
        read_hatecheck_suite(wrong)
    header = ["functionality", "case_id", "test_case", "label_gold", "target_ident"]
    bad = write_csv(tmp_path / "bad.csv", header, [["f", "1", "I hate x", "hateful", ""], ["f", "2", "meh", "maybe", ""],
                                                   ["f", "1", "again", "hateful", ""], ["f", "4", "", "hateful", ""]])
    with pytest.raises(EvaluationInputError) as info:
        read_hatecheck_suite(bad)
    message = str(info.value)
    assert "3 bad case(s)" in message and "line 3: label_gold 'maybe'" in message
    assert "line 4: case_id 1 appears twice" in message and "line 5: test_case is empty" in message
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(",".join(header).encode() + b"\nf,1,caf\xe9,hateful,\n")
    with pytest.raises(EvaluationInputError, match="line 2: the HateCheck suite file is not UTF-8"):
        read_hatecheck_suite(latin1)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(EvaluationInputError, match="is empty"):
        read_hatecheck_suite(empty)
    only_header = write_csv(tmp_path / "header.csv", header, [])
    with pytest.raises(EvaluationInputError, match="no cases"):
        read_hatecheck_suite(only_header)


def test_labelled_files_csv_and_jsonl(tmp_path):
    data = write_csv(tmp_path / "held.csv", ["id", "tweet", "label"], [["a", "hello", "not hate"], ["b", "I hate x", "hate"]])
    s = read_labelled_file(data)
    assert [(c.id, c.text, c.gold) for c in s.cases] == [("a", "hello", "not hate"), ("b", "I hate x", "hate")]
    jsonl = tmp_path / "held.jsonl"
    jsonl.write_text('{"text": "one", "label": "hate"}\n\n{"text": "two", "label": "not hate"}\n')
    assert [c.gold for c in read_labelled_file(jsonl).cases] == ["hate", "not hate"]
    odd = write_csv(tmp_path / "odd.csv", ["words", "y"], [["x", "hate"]])
    with pytest.raises(EvaluationInputError, match="no text column found.*--text-column"):
        read_labelled_file(odd)
    assert read_labelled_file(odd, text_column="words", label_column="y").cases[0].text == "x"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "one", "label": "hate"}\n{nope\n')
    with pytest.raises(EvaluationInputError, match="line 2: not a JSON object"):
        read_labelled_file(broken)



def test_identity_swaps_replace_the_group_term_only():
    cases = [Case("1", "I hate women.", "hate", target="women"),
             Case("2", "Women are the worst.", "hate", target="women"),
             Case("3", "A gay person like you is fine.", "not hate", target="gay people"),
             Case("4", "I hate everyone.", "hate")]
    variants = identity_swaps("suite", cases, limit=None)
    texts = {(v.case, v.group): v.text for v in variants}
    assert texts[("1", "gay people")] == "I hate gay people."
    assert texts[("2", "gay people")] == "Gay people are the worst."
    assert texts[("3", "women")] == "A woman like you is fine."
    assert {v.case for v in variants} == {"1", "2", "3"}
    everyone = identity_swaps("s", cases[:2], limit=None)  # one group only: swap to all known groups
    assert {v.group for v in everyone} == {"trans people", "gay people", "black people", "disabled people",
                                           "Muslims", "immigrants"}
    assert [v.text for v in everyone if v.case == "1" and v.group == "Muslims"] == ["I hate Muslims."]


def test_spelling_perturbations_are_seeded_and_change_the_text():
    rng = random.Random(1)
    assert perturb("hello world", "space_remove", rng) == "helloworld"
    leet = perturb("I hate these people", "leetspeak", random.Random(2))
    assert leet != "I hate these people" and any(ch in leet for ch in "431057")
    swapped = perturb("terrible", "char_swap", random.Random(3))
    assert sorted(swapped) == sorted("terrible") and swapped != "terrible"
    assert perturb("hi", "char_swap", random.Random(0)) is None
    cases = [Case(str(i), f"People like them are awful number {i}", "hate") for i in range(20)]
    first = spelling_perturbations("s", cases, seed=5, limit=10)
    assert first == spelling_perturbations("s", cases, seed=5, limit=10)
    assert {v.kind for v in first} == set(PERTURBATIONS)
    assert all(v.text != cases[int(v.case)].text for v in first)
    assert normalised_text("I&amp;you  ARE\tgreat!!") == normalised_text("i & you are great")



@pytest.fixture
def hate_model(desk, hate_trigger_model_dir):
    """A tiny hate-speech model trained by `dynadesk train`'s trainer: 'banana' means hate."""
    return register_model(desk, hate_trigger_model_dir, name="banana detector", task_code="hate_speech")


@pytest.fixture
def tiny_model(desk, tiny_classifier_dir):
    return register_model(desk, tiny_classifier_dir, name="tiny random", task_code="hate_speech")


def test_the_shared_suite_with_a_tiny_model_and_figures_recomputed_from_json(desk, hate_model, tmp_path):
    suite = read_hatecheck_suite(shared_file(*HATECHECK))
    choices = resolve_models(desk, ["banana detector"])
    reports = []
    doc = evaluate(choices, [suite], EvaluationOptions(swap_cases=60, robustness_cases=60, latency_samples=5),
                   desk=desk, progress=Progress(lambda d, t: reports.append((d, t))))
    assert reports[-1][0] == reports[-1][1] and all(a[0] <= b[0] for a, b in zip(reports, reports[1:]))
    f = doc["results"]["m1"]["sets"]["suite"]
    assert f["n"] == 2297 and len(f["functionalities"]) == 29
    assert sum(v["n"] for v in f["functionalities"].values()) == 2297
    # the trigger model never saw "banana" in HateCheck, so it says "not hate" nearly always
    predicted = [doc["models"][0]["predictions"]["suite"][c.id]["label"] for c in suite.cases]
    gold = [c.gold for c in suite.cases]
    assert f["accuracy"] == pytest.approx(accuracy_score(gold, predicted))
    assert f["macro_f1"] == pytest.approx(f1_score(gold, predicted, average="macro", zero_division=0))
    assert len(f["failing"]) == sum(g != p for g, p in zip(gold, predicted))
    failing = failing_cases(doc, "m1", "suite")
    assert all(row["predicted"] != row["gold"] for row in failing)
    swap = doc["results"]["m1"]["identity_swap"]
    assert swap["cases"] == 60 and swap["variants"] == 60 * 3
    assert set(doc["results"]["m1"]["robustness"]["kinds"]) == set(PERTURBATIONS)
    run = doc["models"][0]["run"]
    assert run["items"] == run["distinct_inputs"] > 2297 and run["items_per_second"] > 0
    assert run["latency_samples"] == 5 and run["latency_p95_ms"] >= run["latency_p50_ms"] > 0
    assert run["peak_rss_mb"] > 0

    path = write_document(doc, tmp_path / "evaluation.json")
    stored = read_json(path)
    assert compute_results(stored) == json.loads(json.dumps(doc["results"]))
    # and by hand from the JSON alone: per functionality, with scikit-learn
    cases = stored["sets"][0]["cases"]
    preds = stored["models"][0]["predictions"]["suite"]
    for name, entry in stored["results"]["m1"]["sets"]["suite"]["functionalities"].items():
        mine = [c for c in cases if c["functionality"] == name]
        assert entry["accuracy"] == pytest.approx(
            accuracy_score([c["gold"] for c in mine], [preds[c["id"]]["label"] for c in mine]))
    html = render_html(stored)
    assert "<svg" in html and "Accuracy per functionality" in html
    assert "<script" not in html and "src=" not in html  # self-contained: nothing to fetch
    assert "banana detector" in html
    assert "Performance = mean of the sets' macro-F1, each set counts equally" in html  # the weighting is said
    assert stored["results"]["m1"]["performance"]["sets"] == [{"set": "suite", "n": 2297, "macro_f1": f["macro_f1"]}]


def test_round_matrix_pairs_and_ensembles(desk, people, hate_model, tiny_model):
    lead = people.lead
    made = []
    for text, label in [("a banana for them", "hate"), ("the river is quiet", "not hate"),
                        ("my banana friend", "hate"), ("old teacher smiled", "not hate")]:
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                                       [hate_output(hate_model, "not hate")])
        desk.validation.validate(example.id, lead.id, "correct", mode="lead")
        made.append(example)
    perturbed = desk.examples.create(people.author.id, "hate_speech", hate_content("a apple for them", "not hate"),
                                     [hate_output(hate_model, "not hate")], perturbation_of=made[0].id)
    desk.validation.validate(perturbed.id, lead.id, "correct", mode="lead")
    desk.examples.create(people.author.id, "hate_speech", hate_content("never validated", "hate"),
                         [hate_output(hate_model, "not hate")])
    sets = round_sets(desk, "hate_speech", "all")
    assert [s.key for s in sets] == ["round-1"] and len(sets[0].cases) == 5
    assert sets[0].pairs == [(str(made[0].id), str(perturbed.id))]
    assert len(round_sets(desk, "hate_speech", [1], include_unvalidated=True)[0].cases) == 6
    with pytest.raises(EvaluationInputError, match="no round 7"):
        round_sets(desk, "hate_speech", [7])

    choices = resolve_models(desk, ["banana detector", "banana detector+tiny random"])
    assert [len(c.records) for c in choices] == [1, 2]
    doc = evaluate(choices, sets, EvaluationOptions(identity_swap=False, robustness=False, latency_samples=2), desk=desk)
    matrix = doc["matrix"]
    assert matrix["models"] == ["m1", "m2"] and matrix["rows"][0]["n"] == 5
    cell = matrix["rows"][0]["cells"]["m1"]
    f = doc["results"]["m1"]["sets"]["round-1"]
    assert cell == {"accuracy": f["accuracy"], "macro_f1": f["macro_f1"], "n": 5}
    assert doc["results"]["m1"]["all_rounds"]["accuracy"] == f["accuracy"]
    assert f["pairs"]["n"] == 1 and f["pairs"]["label_flipping"] == 1
    assert doc["results"]["m1"]["identity_swap"] is None and doc["results"]["m1"]["robustness"] is None
    assert compute_results(json.loads(json.dumps(doc))) == json.loads(json.dumps(doc["results"]))


def test_training_overlap_is_warned_loudly(desk, hate_model, tmp_path):
    source = hate_model.provenance["training"]["data"]
    assert source["path"].endswith("hate-trigger.csv")  # `dynadesk train` records where its data was
    with open(source["path"], encoding="utf-8") as handle:
        trained_on = [row["sentence"] for row in csv.DictReader(handle)][:3]
    rows = [["x1", trained_on[0].upper() + " !", "hate"], ["x2", trained_on[1], "not hate"],
            ["x3", "a sentence nobody trained on", "hate"]]
    data = read_labelled_file(write_csv(tmp_path / "held.csv", ["id", "text", "label"], rows))
    doc = evaluate(resolve_models(desk, ["banana detector"]), [data],
                   EvaluationOptions(identity_swap=False, robustness=False, latency_samples=0), desk=desk)
    check = doc["models"][0]["overlap"]["checks"][0]
    assert check["status"] == "overlap" and check["overlapping"] == 2 and check["by_set"] == {"data": ["x1", "x2"]}
    assert doc["warnings"] and doc["warnings"][0].startswith("WARNING: 2 evaluation case(s) also appear")
    assert "class='warning'" in render_html(doc)


def test_unknown_training_data_is_said_and_an_explicit_file_is_used(desk, tiny_model, tmp_path):
    data = read_labelled_file(write_csv(tmp_path / "held.csv", ["text", "label"], [["hello there", "hate"]]))
    options = EvaluationOptions(identity_swap=False, robustness=False, latency_samples=0)
    doc = evaluate(resolve_models(desk, ["tiny random"]), [data], options, desk=desk)
    assert doc["models"][0]["overlap"]["checks"][0]["status"] == "unknown" and not doc["warnings"]
    note = doc["notes"][0]
    assert "overlap with its training data not checked: its record names no training file" in note
    # it says how to name the file: the option, the tab's button, and the columns it reads
    assert "choose the file with Training… in the Evaluate tab or pass --training-data PATH" in note
    assert "text, test_case, tweet, sentence" in note and "--training-text-column" in note
    training = write_csv(tmp_path / "train.csv", ["text", "label"], [["Hello, there!", "hate"]])
    options.training_data = str(training)
    doc = evaluate(resolve_models(desk, ["tiny random"]), [data], options, desk=desk)
    assert doc["models"][0]["overlap"]["overlapping"] == 1 and doc["warnings"]


def test_resolving_models_explains_mistakes(desk, tiny_model):
    with pytest.raises(EvaluationError, match="No registered model is called 'nope'"):
        resolve_models(desk, ["nope"])
    with pytest.raises(EvaluationError, match="empty part"):
        resolve_models(desk, ["tiny random+"])
    with pytest.raises(EvaluationError, match="Round 1 of hate_speech has no target model"):
        resolve_models(desk, ["round:1"])
    with pytest.raises(EvaluationError, match="round:N"):
        resolve_models(desk, ["round:x"])
    assert resolve_models(desk, [tiny_model.sha256[:10]])[0].records[0].id == tiny_model.id


def test_nothing_to_evaluate_and_cancel(desk, tiny_model):
    choices = resolve_models(desk, ["tiny random"])
    with pytest.raises(EvaluationError, match="nothing to evaluate"):
        evaluate(choices, [EvalSet("round-1", "Round 1", "round", [])])
    cases = [Case(str(i), f"text number {i}", "hate") for i in range(300)]
    progress = Progress()
    progress.cancel()
    with pytest.raises(Cancelled):
        evaluate(choices, [EvalSet("data", "d", "dataset", cases)], EvaluationOptions(batch_size=8), progress=progress)


def test_batch_work_uses_every_core_only_when_the_machine_is_idle(monkeypatch):
    import os

    from local_models.batch_run import batch_threads
    from local_models.engine import default_num_threads

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.3, 0.3))
    assert batch_threads() == 4
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 3.0, 2.0))
    assert batch_threads() == default_num_threads() == 2


def test_a_training_file_line_that_is_not_an_object_is_named_not_a_crash(tmp_path):
    from app.core.services.evaluation_data import read_training_texts

    training = tmp_path / "train.jsonl"
    training.write_text('{"text": "fine"}\n\n3\n', encoding="utf-8")
    with pytest.raises(EvaluationInputError, match=r"train.jsonl, line 3: not a JSON object"):
        read_training_texts(training)
    training.write_text('{"text": "fine"}\n{"tweet": "also fine", "label": 1}\n', encoding="utf-8")
    assert read_training_texts(training) == ["fine", "also fine"]


def test_a_decided_perturbation_of_an_undecided_grouped_original_keeps_the_groups_side(desk, people, hate_model):
    """Round cases are read by column, decided ones only; a pair's original that is not a case still lends
    its split group to the perturbation, so the pair never straddles the held-out split."""
    original = desk.examples.create(people.author.id, "hate_speech", hate_content("a banana for them", "hate"),
                                    [hate_output(hate_model, "not hate")], origin={"group": "templ_id=7"})
    perturbed = desk.examples.create(people.author.id, "hate_speech", hate_content("a apple for them", "not hate"),
                                     [hate_output(hate_model, "not hate")], perturbation_of=original.id)
    desk.validation.validate(perturbed.id, people.lead.id, "correct", mode="lead")
    (case,) = round_sets(desk, "hate_speech", [1])[0].cases
    assert case.id == str(perturbed.id) and case.extra == {"perturbation_of": str(original.id), "group": "templ_id=7"}
