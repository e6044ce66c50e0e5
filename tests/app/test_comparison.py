"""Compare before promoting: the paired bootstrap against brute force and hand-made cases; the
service on a desk with two rounds of decided examples and two tiny real models, its per-round
figures against a hand count; the report files; the CLI once."""

from __future__ import annotations

import csv
import json
import random
import shutil

import numpy as np
import pytest
from sklearn.metrics import f1_score

from app.cli.compare import REFUSED_EXIT
from app.core.next_round.comparison import (
    ComparisonError,
    compare_candidate,
    read_report,
)
from app.core.next_round.comparison_report import write_report
from app.core.services.bootstrap import paired_bootstrap
from app.core.tasks.splits import is_held_out
from tests.conftest import hate_content, hate_output
from tests.model_fixtures import FILLER, TRIGGER


def test_identical_models_differ_by_exactly_zero():
    gold = ["a", "b", "a", "c", "b", "a"] * 5
    predicted = ["a", "a", "a", "c", "c", "b"] * 5
    for metric in ("accuracy", "macro_f1"):
        interval = paired_bootstrap(gold, predicted, predicted, metric, resamples=300, seed=4)
        assert (interval.difference, interval.low, interval.high, interval.items) == (0.0, 0.0, 0.0, 30)


def test_always_right_against_half_wrong_excludes_zero_and_repeats_with_its_seed():
    gold = ["hate", "not hate"] * 20
    current = [g if (i // 2) % 2 == 0 else ("not hate" if g == "hate" else "hate") for i, g in enumerate(gold)]
    assert sum(c != g for c, g in zip(current, gold)) == 20  # wrong on half the items
    interval = paired_bootstrap(gold, current, gold, "accuracy", resamples=1000, seed=7, stream="x")
    assert interval.current == 0.5 and interval.candidate == 1.0 and interval.difference == 0.5
    assert 0 < interval.low < 0.5 < interval.high <= 0.75
    assert paired_bootstrap(gold, current, gold, "accuracy", resamples=1000, seed=7, stream="x") == interval
    assert paired_bootstrap(gold, current, gold, "accuracy", resamples=1000, seed=8, stream="x") != interval
    reversed_ = paired_bootstrap(gold, gold, current, "accuracy", resamples=1000, seed=7, stream="x")
    assert reversed_.high < 0 and reversed_.difference == -0.5


def test_the_interval_is_the_percentile_of_brute_force_paired_resamples():
    rng = random.Random(3)
    labels = ["a", "b", "c"]
    gold = [rng.choice(labels) for _ in range(40)]
    current = [g if rng.random() < 0.6 else rng.choice(labels) for g in gold]
    candidate = [g if rng.random() < 0.7 else rng.choice(labels[:2]) for g in gold]
    resamples, seed, stream = 200, 11, "round-1"
    # the same draws, one resample at a time, scored by scikit-learn
    generator = np.random.default_rng([seed, __import__("zlib").crc32(stream.encode())])
    draws = generator.integers(0, len(gold), size=(resamples, len(gold)))
    for metric in ("accuracy", "macro_f1"):
        def score(g, p, metric=metric):
            if metric == "accuracy":
                return float(np.mean([a == b for a, b in zip(g, p)]))
            return float(f1_score(g, p, average="macro", zero_division=0))

        brute = [score([gold[i] for i in d], [candidate[i] for i in d]) - score([gold[i] for i in d], [current[i] for i in d])
                 for d in draws]
        interval = paired_bootstrap(gold, current, candidate, metric, resamples=resamples, seed=seed, stream=stream)
        assert interval.difference == pytest.approx(score(gold, candidate) - score(gold, current))
        assert interval.low == pytest.approx(np.percentile(brute, 2.5))
        assert interval.high == pytest.approx(np.percentile(brute, 97.5))
    empty = paired_bootstrap([], [], [], "accuracy")
    assert empty.items == 0 and empty.difference is None and empty.low is None


def test_pairs_are_drawn_together():
    """With groups, a resample draws whole groups (a perturbation pair is one): brute force over the same draws."""
    rng = random.Random(5)
    gold = [rng.choice(["a", "b"]) for _ in range(30)]
    current = [g if rng.random() < 0.5 else rng.choice("ab") for g in gold]
    candidate = [g if rng.random() < 0.8 else rng.choice("ab") for g in gold]
    groups = [f"g{i // 2}" if i < 20 else f"single{i}" for i in range(30)]  # ten pairs, ten singles
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    order = list(members)
    generator = np.random.default_rng([2, __import__("zlib").crc32(b"pairs")])
    brute = []
    for draw in generator.integers(0, len(order), size=(300, len(order))):
        items = [i for k in draw for i in members[order[k]]]
        brute.append(f1_score([gold[i] for i in items], [candidate[i] for i in items], average="macro", zero_division=0)
                     - f1_score([gold[i] for i in items], [current[i] for i in items], average="macro", zero_division=0))
    interval = paired_bootstrap(gold, current, candidate, "macro_f1", groups=groups, resamples=300, seed=2,
                                stream="pairs")
    assert interval.items == 30
    assert (interval.low, interval.high) == pytest.approx((np.percentile(brute, 2.5), np.percentile(brute, 97.5)))
    assert interval.difference == pytest.approx(f1_score(gold, candidate, average="macro")
                                                - f1_score(gold, current, average="macro"))


def _texts(seed: int, count: int) -> list[tuple[str, str]]:
    """Filler sentences; every other one carries the trigger word the current model calls hate."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        words = [rng.choice(FILLER) for _ in range(rng.randint(4, 8))] + [f"w{seed}x{i}"]
        if i % 2 == 0:
            words.insert(rng.randrange(len(words)), TRIGGER)
        rows.append((" ".join(words), "hate" if i % 2 == 0 else "not hate"))
    return rows


def _collect(desk, people, model, round_seed: int, count: int) -> list[dict]:
    """Examples of the open round, written against ``model``: their labels are chosen so that the
    trigger model is fooled on some, and validators decide most of them (some by correcting them)."""
    made = []
    for i, (text, trigger_label) in enumerate(_texts(round_seed, count)):
        flip = i % 3 == 0  # the author's label disagrees with the trigger: the model is fooled
        label = ("not hate" if trigger_label == "hate" else "hate") if flip else trigger_label
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                                       [hate_output(model, trigger_label)])
        kind = i % 5
        if kind == 4:
            gold = None  # never validated: left out
        elif kind == 3:
            gold = "not hate" if label == "hate" else "hate"  # a lead corrects the author's label
            desk.validation.validate(example.id, people.lead.id, "incorrect", corrected_label=gold,
                                     reason="the other label", mode="lead")
        else:
            gold = label
            desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")
        made.append({"id": str(example.id), "text": text, "label": label, "gold": gold, "trigger": trigger_label,
                     "fooled": label != trigger_label and gold == label, "held_out": is_held_out(example.id)})
    return made


@pytest.fixture
def rounds_desk(desk, people, hate_trigger_model_dir, tiny_classifier_dir, tmp_path):
    from app.core.services.target_models import register_model

    current_dir = tmp_path / "current"
    shutil.copytree(hate_trigger_model_dir, current_dir)
    current = register_model(desk, current_dir, name="banana detector", task_code="hate_speech")
    round_1 = desk.tasks.round("hate_speech", 1)
    desk.rounds.set_models(round_1.id, people.lead.id, [current.id])
    first = _collect(desk, people, current, 1, 90)
    desk.rounds.open_next("hate_speech", people.lead.id, [current.id])
    second = _collect(desk, people, current, 2, 90)
    candidate_dir = tmp_path / "candidate"
    shutil.copytree(tiny_classifier_dir, candidate_dir)
    return {"current": current, "rounds": {1: first, 2: second}, "candidate": candidate_dir}


def test_the_service_on_two_rounds_matches_a_hand_count(desk, rounds_desk, tmp_path):
    from local_models.engine import load_engine

    report = compare_candidate(desk, "hate_speech", rounds_desk["candidate"], resamples=300, seed=1)
    doc = report.document
    assert report.current_sha256s == (rounds_desk["current"].sha256,)
    engine = load_engine(rounds_desk["candidate"], task_labels=["hate", "not hate"])
    assert report.candidate_sha256 == engine.sha256
    splits = {s["key"]: s for s in doc["splits"]}
    assert doc["current"]["round"] == 2 and splits["held-out-1"]["round"] == 1  # round 2 is open, with the same target
    pooled_right = {"current": 0, "candidate": 0, "n": 0}
    for number, made in rounds_desk["rounds"].items():
        held = [m for m in made if m["held_out"] and m["gold"] is not None]
        assert held, "the hash holds out about one example in ten"
        split = splits[f"held-out-{number}"]
        assert [i["id"] for i in split["items"]] == [m["id"] for m in held]
        candidate_labels = [p.label for p in engine.predict([m["text"] for m in held])]
        assert [i["candidate"]["label"] for i in split["items"]] == candidate_labels
        # the current model says what the trigger says; gold is the decided label
        assert [i["current"]["label"] for i in split["items"]] == [m["trigger"] for m in held]
        right_now = sum(m["trigger"] == m["gold"] for m in held)
        right_new = sum(c == m["gold"] for c, m in zip(candidate_labels, held))
        rows = {d.metric: d for d in report.differences if d.split == f"held-out-{number}"}
        assert rows["accuracy"].items == len(held)
        assert rows["accuracy"].current == pytest.approx(right_now / len(held))
        assert rows["accuracy"].candidate == pytest.approx(right_new / len(held))
        assert rows["macro_f1"].candidate == pytest.approx(
            f1_score([m["gold"] for m in held], candidate_labels, average="macro", zero_division=0))
        fooling = [(m, c) for m, c in zip(held, candidate_labels) if m["fooled"]]
        assert rows["fooling_right"].items == len(fooling)
        if fooling:  # validated fooling: the current model was wrong on each, by definition
            assert rows["fooling_right"].current == 0.0
            assert rows["fooling_right"].candidate == pytest.approx(
                sum(c == m["gold"] for m, c in fooling) / len(fooling))
        pooled_right["current"] += right_now
        pooled_right["candidate"] += right_new
        pooled_right["n"] += len(held)
    pooled = report.pooled
    assert (pooled.split, pooled.metric, pooled.items) == ("held-out", "accuracy", pooled_right["n"])
    assert pooled.difference == pytest.approx((pooled_right["candidate"] - pooled_right["current"]) / pooled_right["n"])
    assert pooled.low <= pooled.difference <= pooled.high
    # about nine held-out examples a round: too few to judge anywhere, so the promotion rule refuses
    assert report.worse and report.verdict.refused and "no split has enough examples" in report.verdict.sentence
    pooled_fooling = next(d for d in report.differences if (d.split, d.metric) == ("held-out", "fooling_right"))
    # which examples the hash holds out follows their random ids: some runs hold out no fooling one (0 == 0)
    assert pooled_fooling.items == sum(m["fooled"] and m["held_out"] for made in rounds_desk["rounds"].values()
                                       for m in made)
    assert report.summary_lines()[1].strip().startswith(f"All held-out splits: too few to judge (n = {pooled.items}; "
                                                        "at least 97)")
    assert report.document["verdict"]["refused"] is True

    json_path, html_path = write_report(report, tmp_path / "out")
    again = read_report(json_path)
    assert again.differences == report.differences and again.pooled == report.pooled and again.worse == report.worse
    html = html_path.read_text(encoding="utf-8")
    assert "<svg" in html and "<script" not in html and "held-out-1" in html
    # the same seed gives the same intervals; rounds narrow the splits
    only_one = compare_candidate(desk, "hate_speech", rounds_desk["candidate"], rounds=[1], resamples=300, seed=1)
    assert {d.split for d in only_one.differences} == {"held-out", "held-out-1"}
    assert [d for d in only_one.differences if d.split == "held-out-1"] == \
        [d for d in report.differences if d.split == "held-out-1"]


def test_base_test_suite_and_bad_input(desk, rounds_desk, tmp_path):
    from app.core.next_round.comparison import BaseTestOptions

    base = tmp_path / "base.csv"
    rows = _texts(9, 60)
    with open(base, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["tweet", "class"])
        writer.writerows([(t, "0" if label == "hate" else "1") for t, label in rows])
    suite = tmp_path / "suite.csv"
    with open(suite, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["functionality", "case_id", "test_case", "label_gold", "templ_id"])
        writer.writerows([("f1" if i % 2 else "f2", str(i), t, "hateful" if label == "hate" else "non-hateful", i)
                          for i, (t, label) in enumerate(_texts(10, 12))])
    options = BaseTestOptions("tweet", "class", {"0": "hate", "1": "not hate"}, split_seed=13)
    report = compare_candidate(desk, "hate_speech", rounds_desk["candidate"], base_test=base, suite=suite,
                               base_options=options, resamples=200)
    rows_by = {(d.split, d.metric): d for d in report.differences}
    assert rows_by[("base-test", "accuracy")].items == 6  # dynadesk train's 10 % test split
    assert rows_by[("base-test", "accuracy")].current == 1.0  # the trigger model on trigger sentences
    assert rows_by[("suite", "accuracy")].items == 12 and ("suite", "fooling_right") not in rows_by

    with pytest.raises(ComparisonError, match="label map|labels the task does not know"):
        compare_candidate(desk, "hate_speech", rounds_desk["candidate"], base_test=base,
                          base_options=BaseTestOptions("tweet", "class"), resamples=200)
    with pytest.raises(ComparisonError, match="no column 'text'"):
        compare_candidate(desk, "hate_speech", rounds_desk["candidate"], base_test=base,
                          base_options=BaseTestOptions("text", "class"), resamples=200)
    with pytest.raises(ComparisonError, match="no model folder"):
        compare_candidate(desk, "hate_speech", tmp_path / "nowhere", resamples=200)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ComparisonError, match="not a usable model"):
        compare_candidate(desk, "hate_speech", tmp_path / "empty", resamples=200)


def test_the_cli_prints_the_table_and_writes_the_report(desk, rounds_desk, data_dir, people, tmp_path, capsys):
    from app.cli import main
    from app.core.wellbeing.profile import WellbeingProfile

    # the lead reads reports masked, and blurs the word the current model calls hate
    desk.set_task_settings(people.lead.id, "hate_speech", blur_words=[TRIGGER])
    desk.switch_person(people.lead.id)
    desk.settings.wellbeing = {str(people.lead.id): WellbeingProfile(blur_browsing=True)}
    desk.save_settings()
    desk.close()
    out = tmp_path / "report"
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "compare", "--task", "hate_speech", "--model",
              str(rounds_desk["candidate"]), "--resamples", "200", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "held-out-1" in printed and "held-out-2" in printed and "fooling_right" in printed
    assert "difference, points [95% interval]" in printed
    document = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    # a script chains `compare && promote`: the rule's refusal is the command's failure
    assert exited.value.code == (REFUSED_EXIT if document["verdict"]["refused"] else 0), printed
    assert document["format"] == "dynadesk-comparison" and (out / "comparison.html").is_file()
    assert all({"current", "candidate", "gold"} <= set(item) for s in document["splits"] for item in s["items"])
    # the page's example lists pass the blur (the JSON keeps the data whole)
    differing = [i["text"] for s in document["splits"] for i in s["items"]
                 if i["current"]["label"] != i["candidate"]["label"]]
    assert any(TRIGGER in text for text in differing)
    html = (out / "comparison.html").read_text(encoding="utf-8")
    items = html[html.index("Items on which the two models differ"):html.rindex("</details>")]
    assert TRIGGER not in items and "•" * len(TRIGGER) in items
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "compare", "--task", "hate_speech", "--model",
              str(rounds_desk["candidate"]), "--base-test", str(out / "comparison.json")])
    assert exited.value.code != 0
    assert "--text-column" in capsys.readouterr().err


def test_a_trained_part_of_the_current_model_compares_equal_and_is_not_worse(desk, rounds_desk, hate_trigger_model_dir,
                                                                             data_dir, tmp_path, capsys):
    part = tmp_path / "part"  # what dynadesk train --out writes: assembled with its base, as registering does
    shutil.copytree(hate_trigger_model_dir.parent.parent / "parts" / "hate-trigger", part)
    report = compare_candidate(desk, "hate_speech", part, resamples=200)
    assert report.candidate_sha256 == rounds_desk["current"].sha256  # the very same weights
    assert report.pooled.items > 0
    assert {s.state for s in report.verdict.splits} <= {"too few", "no items"}  # the same model: never worse
    assert "no split has enough examples" in report.verdict.sentence
    for d in report.differences:
        assert (d.difference, d.low, d.high) == ((0.0, 0.0, 0.0) if d.items else (None, None, None))
    assert report.document["candidate"]["name"].endswith("(candidate)")
    from local_models.errors import Cancelled
    from local_models.progress import Progress

    cancelled = Progress()
    cancelled.cancel()
    with pytest.raises(Cancelled):
        compare_candidate(desk, "hate_speech", part, resamples=200, progress=cancelled)

    # refused (no split has enough examples): the command fails, so `compare && promote` stops there
    from app.cli import main

    desk.close()
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "compare", "--task", "hate_speech", "--model", str(part),
              "--resamples", "200"])
    assert exited.value.code == REFUSED_EXIT
    assert "no split has enough examples" in capsys.readouterr().out


def test_after_training_on_an_imported_round_compare_scores_exactly_what_training_held_out(
        desk, tiny_base_dir, hate_trigger_model_dir, data_dir, tmp_path, capsys):
    """`dynadesk train --rounds 1 --imported hatecheck` holds out whole templates of undecided imported cases;
    `rounds compare` then scores exactly those (it read "no round has decided held-out examples" before),
    and the base data's test split the manifest names, with no --base-test given."""
    from app.cli import main
    from app.core.io.importers import import_file
    from app.core.services.target_models import register_model
    from tests.app.test_stats import csv_slice
    from tests.conftest import shared_file
    from tests.local_models.test_train_rounds import TINY
    from tests.model_fixtures import LABELS, trigger_sentences

    target = register_model(desk, hate_trigger_model_dir, task_code="hate_speech")
    assert desk.rounds.adopt_first_models("hate_speech", [target.id])
    cases = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp_path / "hatecheck.csv", 200)
    import_file(desk, cases, "hatecheck", task_code="hate_speech", round_number=1, group_column="templ_id")
    suite = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp_path / "functional.csv", 120)
    import_file(desk, suite, "hatecheck", task_code="hate_speech")  # a functional suite of the task, stored
    base = tmp_path / "base.csv"
    with open(base, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "kind"])
        writer.writerows(trigger_sentences(160, seed=22, labels=LABELS))
    desk.close()

    def run(*args) -> tuple[int, str]:
        with pytest.raises(SystemExit) as stopped:
            main(["--data-dir", str(data_dir), *map(str, args)])
        captured = capsys.readouterr()
        return stopped.value.code, captured.out + captured.err

    out = tmp_path / "candidate"
    code, printed = run("train", "--task", "hate_speech", "--rounds", "1", "--imported", "hatecheck", "--base", base,
                        "--text-column", "sentence", "--label-column", "kind", "--encoder", tiny_base_dir,
                        "--seed", "5", "--out", out, *TINY)
    assert code == 0, printed
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    held = manifest["data"]["splits"]["held_out"]
    assert manifest["data"]["summary"]["per_source"] == {"imported": 200}  # undecided imported cases, all taken
    assert 0 < len(held) < 100  # the cases of the held-out templates

    code, printed = run("rounds", "compare", "--task", "hate_speech", "--model", out, "--resamples", "200",
                        "--out", tmp_path / "report")
    assert "No held-out example" not in printed
    document = json.loads((tmp_path / "report" / "comparison.json").read_text(encoding="utf-8"))
    assert code == (REFUSED_EXIT if document["verdict"]["refused"] else 0), printed
    splits = {s["key"]: s for s in document["splits"]}
    assert [i["id"] for i in splits["held-out-1"]["items"]] == held
    assert all(i["group"] for i in splits["held-out-1"]["items"])  # drawn by template in the bootstrap
    # the base test split training held out (its own seed, from the manifest), not the default seed's
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, stratified_split

    test_rows = stratified_split(read_labelled_csv(base, "sentence", "kind").labels, TrainingConfig(seed=5))[2]
    assert [i["id"] for i in splits["base-test"]["items"]] == [f"row-{i}" for i in test_rows]
    assert f"base:{test_rows[0]}" in manifest["data"]["splits"]["base_test"]
    assert f"Round 1 held-out: too few to judge (n = {len(held)}; at least 97)" in printed
    # every suite the task has is a split of its own, judged by the same rule
    assert len(splits["suite-functional"]["items"]) == 120 and splits["suite-functional"]["kind"] == "suite"
    assert "functional (suite, 120 cases): " in printed
    assert any(s["split"] == "suite-functional" for s in document["verdict"]["splits"])
