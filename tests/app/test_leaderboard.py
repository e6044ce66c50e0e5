"""The model leaderboard on a real desk: two rounds of decided examples, round 1's target a tiny
trained model, round 2's an ensemble of a second tiny model with it. Its figures against an
independent count on the held-out ids; the cache (model loads counted), staleness after a new
decision, a model whose files are not on this desk, the CLI with its HTML and JSON files, and the
section in the evaluation report."""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest
from sklearn.metrics import f1_score

from app.core.next_round.leaderboard import (
    EMPTY,
    FILES_NOT_HERE,
    FRESH,
    MISSING,
    NO_FILES,
    STALE,
    Cell,
    figure_text,
    fill_leaderboard,
    read_leaderboard,
)
from app.core.services import evaluation_models
from app.core.services.bootstrap import bootstrap_interval
from app.core.tasks.splits import is_held_out
from tests.app.test_comparison import _collect
from tests.conftest import hate_content, hate_output

LABELS = ["hate", "not hate"]


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The name of every model (or ensemble) the evaluation service loads."""
    calls: list[str] = []
    real = evaluation_models.load_predictor

    def counting(choice, num_threads=None):
        calls.append(choice.name)
        return real(choice, num_threads)

    monkeypatch.setattr(evaluation_models, "load_predictor", counting)
    return calls


@pytest.fixture
def board_desk(desk, people, hate_trigger_model_dir, tiny_classifier_dir, tmp_path):
    from app.core.services.target_models import register_model

    folders = {}
    for name, source in (("banana", hate_trigger_model_dir), ("random", tiny_classifier_dir)):
        folders[name] = tmp_path / name
        shutil.copytree(source, folders[name])
    banana = register_model(desk, folders["banana"], name="banana detector", task_code="hate_speech")
    plain = register_model(desk, folders["random"], name="random tiny", task_code="hate_speech")
    desk.rounds.set_models(desk.tasks.round("hate_speech", 1).id, people.lead.id, [banana.id])
    first = _collect(desk, people, banana, 1, 90)
    desk.rounds.open_next("hate_speech", people.lead.id, [plain.id, banana.id])  # an ensemble, as --with-current makes
    second = _collect(desk, people, plain, 2, 90)
    return {"banana": banana, "plain": plain, "rounds": {1: first, 2: second}, "folders": folders}


def _predict(folders, names, texts):
    """Labels by hand: each model's probabilities, averaged over an ensemble's members."""
    from local_models.engine import load_engine

    total = np.zeros((len(texts), len(LABELS)))
    for name in names:
        engine = load_engine(folders[name], task_labels=LABELS)
        try:
            total += [[p.probabilities[label] for label in LABELS] for p in engine.predict(texts)]
        finally:
            engine.close()
    return [LABELS[i] for i in total.argmax(axis=1)]


def test_the_board_matches_a_hand_count_and_is_kept(desk, board_desk, loads):
    report = fill_leaderboard(desk, "hate_speech")
    board = report.board
    assert [r.name for r in board.rows] == ["banana detector", "random tiny", "random tiny + banana detector"]
    banana, plain, both = board.rows
    assert (banana.rounds, plain.rounds, both.rounds, both.ensemble) == ((1, 2), (2,), (2,), True)
    assert both.current and not banana.current  # round 2 is open; its target is the ensemble
    assert [c.number for c in board.columns] == [1, 2] and [c.status for c in board.columns] == ["closed", "open"]
    assert report.scored == 6 and report.failed == 0
    assert sorted(loads) == sorted(r.name for r in board.rows)  # one load per model, for both rounds

    members = {banana.key: ["banana"], plain.key: ["random"], both.key: ["random", "banana"]}
    for column in board.columns:
        held = [m for m in board_desk["rounds"][column.number] if m["held_out"] and m["gold"] is not None]
        assert held and column.n == len(held)
        assert column.fooling == sum(m["fooled"] for m in held)
        gold = [m["gold"] for m in held]
        for row in board.rows:
            cell = board.cell(row, column)
            predicted = _predict(board_desk["folders"], members[row.key], [m["text"] for m in held])
            right = [p == g for p, g in zip(predicted, gold)]
            assert cell.state == FRESH and cell.n == len(held)
            assert cell.accuracy == pytest.approx(sum(right) / len(held))
            assert cell.macro_f1 == pytest.approx(f1_score(gold, predicted, average="macro", zero_division=0))
            fooling = [r for r, m in zip(right, held) if m["fooled"]]
            assert cell.fooling_n == len(fooling)
            assert cell.fooling_right == (pytest.approx(sum(fooling) / len(fooling)) if fooling else None)
            assert (cell.low, cell.high) == pytest.approx(bootstrap_interval(
                gold, predicted, groups=[m["id"] for m in held], resamples=1000, stream=f"held-out-{column.number}"))
            assert cell.low <= cell.accuracy <= cell.high
        top = max(board.cell(r, column).accuracy for r in board.rows)
        assert board.best(column, "accuracy") == {r.key for r in board.rows if board.cell(r, column).accuracy == top}

    # a second fill finds every cell kept: no model is loaded again
    again = fill_leaderboard(desk, "hate_speech")
    assert again.scored == 0 and len(loads) == 3
    assert again.board.cells == board.cells

    # a new decision on a held-out example of the open round makes that round's cells stale, and only those
    people = desk.people.all()
    author = next(p for p in people if p.display_name == "Ana Author")
    lead = next(p for p in people if p.display_name == "Lee Lead")
    rng = random.Random(7)
    example = None
    while example is None or not is_held_out(example.id):  # undecided examples are in no split
        example = desk.examples.create(author.id, "hate_speech", hate_content(f"late banana {rng.random()}", "hate"),
                                       [hate_output(board_desk["plain"], "hate")])
    stale_round = 2
    desk.validation.validate(example.id, lead.id, "correct", mode="lead")
    stale = read_leaderboard(desk, "hate_speech")
    for row in stale.rows:
        for column in stale.columns:
            cell = stale.cell(row, column)
            assert cell.state == (STALE if column.number == stale_round else FRESH)
            if cell.state == STALE:
                assert cell.accuracy == board.cell(row, column).accuracy  # the old figures, marked
    assert fill_leaderboard(desk, "hate_speech").scored == 0 and len(loads) == 3  # stale waits for a refresh
    refreshed = fill_leaderboard(desk, "hate_speech", refresh=True)
    assert refreshed.scored == 3 and len(loads) == 6
    assert {refreshed.board.cell(r, c).state for r in refreshed.board.rows for c in refreshed.board.columns} == {FRESH}
    assert refreshed.board.columns[stale_round - 1].n == board.columns[stale_round - 1].n + 1


def test_missing_files_the_cli_and_the_report(desk, board_desk, data_dir, tmp_path, capsys, loads):
    from app.cli import main
    from app.core.next_round.leaderboard_report import evaluation_sections
    from app.core.services.evaluation_report import render_html

    lead = next(p for p in desk.people.all() if p.display_name == "Lee Lead")
    desk.models.register("trained elsewhere", "onnx", "cd" * 32, path=str(tmp_path / "not-here"),
                                     task_id=desk.tasks.task("hate_speech").id)
    desk.switch_person(lead.id)
    shutil.rmtree(board_desk["folders"]["random"])  # its cells were never scored: nothing to show
    desk.close()

    # a round change in the CLI fills the board right after it
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "open", "--task", "hate_speech", "--model", "cd" * 6])
    out = capsys.readouterr().out
    assert exited.value.code == 0, out
    assert "Opened hate_speech round 3." in out and "Scored 2 cells of the leaderboard" in out
    assert loads == ["banana detector"]  # the only model whose files are here

    html, data = tmp_path / "board.html", tmp_path / "board.json"
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "leaderboard", "--task", "hate_speech",
              "--html", str(html), "--json", str(data)])
    out = capsys.readouterr().out
    assert exited.value.code == 0, out
    assert loads == ["banana detector"]  # kept: nothing scored again
    lines = out.splitlines()
    assert lines[0].startswith("Hate speech") and "Round 1 (closed" in lines[1] and "Round 3 (open, n=0" in lines[1]
    row = next(line for line in lines if line.startswith("> trained elsewhere"))
    assert row.count(FILES_NOT_HERE) == 2 and "no held-out examples" in row  # rounds 1 and 2; round 3 is empty
    assert next(line for line in lines if line.strip().startswith("random tiny (")).count(FILES_NOT_HERE) == 2
    banana = next(line for line in lines if line.strip().startswith("banana detector"))
    assert "%" in banana and FILES_NOT_HERE not in banana

    document = json.loads(data.read_text(encoding="utf-8"))
    assert document["format"] == "dynadesk-leaderboard"
    states = {(c["row"], c["round"]): c["state"] for c in document["cells"]}
    keys = {r["name"]: r["key"] for r in document["rows"]}
    assert states[(keys["trained elsewhere"], 1)] == NO_FILES and states[(keys["trained elsewhere"], 3)] == EMPTY
    assert states[(keys["banana detector"], 1)] == FRESH
    assert FILES_NOT_HERE in html.read_text(encoding="utf-8") and "<script" not in html.read_text(encoding="utf-8")

    # the evaluation report carries the section when its document holds the board
    doc = {"task": "hate_speech", "created_at": "now", "machine": {"platform": "test"}, "models": [], "sets": [],
           "options": {"weights": {d: 1 for d in ("performance", "throughput", "memory", "fairness", "robustness")}},
           "matrix": {"rows": []}, "results": {}, "leaderboard": document}
    page = render_html(doc, sections=evaluation_sections(doc))
    assert "Model leaderboard" in page and "trained elsewhere" in page and "(current target)" in page
    assert "table.leaderboard td.best" in page  # the section's style rules join the page's
    unreadable = {**doc, "leaderboard": {"format": "dynadesk-leaderboard", "rows": 1}}
    assert "cannot be read" in render_html(unreadable, sections=evaluation_sections(unreadable))
    assert evaluation_sections({**doc, "leaderboard": None}) == []

    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "leaderboard", "--task", "hate_speech", "--refresh", "--cached"])
    assert exited.value.code == 1 and "choose one" in capsys.readouterr().err
    # --cached shows what is stored without scoring
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "rounds", "leaderboard", "--task", "hate_speech", "--cached"])
    assert exited.value.code == 0 and loads == ["banana detector"]
    assert MISSING not in {c["state"] for c in document["cells"]}
    assert figure_text(Cell(NO_FILES), "accuracy") == FILES_NOT_HERE


def test_the_accuracy_interval_is_the_percentile_of_brute_force_resamples():
    from app.core.services.bootstrap import _generator

    rng = random.Random(5)
    gold = [rng.choice(LABELS) for _ in range(40)]
    predicted = [g if rng.random() < 0.7 else rng.choice(LABELS) for g in gold]
    groups = [f"g{i // 2}" for i in range(40)]  # pairs drawn together
    low, high = bootstrap_interval(gold, predicted, groups=groups, resamples=500, seed=3, stream="held-out-1")
    draws = _generator(3, "held-out-1").integers(0, 20, size=(500, 20))
    brute = [np.mean([gold[2 * g + k] == predicted[2 * g + k] for g in draw for k in (0, 1)]) for draw in draws]
    assert (low, high) == pytest.approx((np.percentile(brute, 2.5), np.percentile(brute, 97.5)))
    assert low <= sum(g == p for g, p in zip(gold, predicted)) / 40 <= high
    assert bootstrap_interval([], [], resamples=10) == (None, None)
