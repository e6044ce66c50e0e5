"""Progress stage by stage (app.views.stage_progress), on a fake clock: each stage is named with its counts,
its time left comes from its own measured rate, "estimating…" shows only for its first seconds, and no stage
ever reads 100 % and then 0 % under the same words."""

from __future__ import annotations

from app.cli.progress import staged_progress
from app.views.next_round import ESTIMATING
from app.views.stage_progress import SETTLE_S, StageClock
from local_models.progress import Progress, parse_stage, stage_line


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_stage_line_is_read_back_with_its_number_count_and_unit():
    assert stage_line(1, 4, "frozen layers", "texts") == "1 of 4: frozen layers (texts)"
    stage = parse_stage("1 of 4: frozen layers (texts)")
    assert stage is not None and (stage.number, stage.count, stage.name, stage.unit) == (1, 4, "frozen layers", "texts")
    assert parse_stage("Step 2 of 3: Building its ONNX version and checking it").unit == ""  # the older form
    assert parse_stage("Split 24,783 texts: 19,000 train") is None


def test_each_stage_is_named_with_its_counts_and_timed_on_its_own_rate():
    clock = FakeClock()
    stages = StageClock(clock)
    progress = Progress(stages.report, stages.say)
    frozen = progress.step(1, 4, "frozen layers", "texts")
    frozen.report(0, 27_067)
    assert stages.view().eta == ESTIMATING and stages.view().fraction == 0.0
    clock.now += 60.0
    frozen.report(12_416, 27_067)
    view = stages.view()
    assert view.text == "1 of 4: frozen layers — 12,416 of 27,067 texts"
    # 12,416 texts in 60 s: 14,651 left at that rate is 70.8 s
    assert view.eta == "about 1 min 11 s left" and round(view.fraction, 3) == 0.459
    clock.now += 70.0
    frozen.report(27_067, 27_067)
    assert stages.view().eta == "finishing…" and stages.view().fraction == 1.0

    # the next stage counts steps, at its own (much slower) rate: the frozen pass's rate says nothing about it
    training = progress.step(2, 4, "training", "steps")
    view = stages.view()
    assert view.text == "2 of 4: training" and view.fraction is None and view.eta == ESTIMATING  # never 100 % → 0 %
    training.say("epoch 1 of 3: 684 steps")
    clock.now += 2.0
    training.report(10, 2_052)
    assert stages.view().eta == ESTIMATING  # its first seconds
    clock.now += SETTLE_S + 8.0  # 15 s into the stage, 100 steps done
    training.report(100, 2_052)
    view = stages.view()
    assert view.text == "2 of 4: training — epoch 1 of 3: 684 steps — 100 of 2,052 steps"
    assert view.eta == "about 4 min 53 s left"  # 1,952 steps at 100 / 15 s


def test_an_int8_search_reports_each_attempt_and_times_each_on_its_own():
    clock = FakeClock()
    stages = StageClock(clock)
    search = Progress(stages.report, stages.say).step(4, 4, "int8 search", "texts")
    search.say("attempt 1 (more follow if it fails): dynamic, weights per channel, on 4,963 parity texts")
    for done in (0, 2_000, 4_000):
        search.report(done, 4_963)
        clock.now += 20.0
    first = stages.view()
    assert first.text.startswith("4 of 4: int8 search — attempt 1") and first.text.endswith("4,000 of 4,963 texts")
    assert first.eta != ESTIMATING
    search.say("attempt 2 of 9: dynamic, weights per channel, outlier input channels (peak over 6x the median) kept "
               "float, on 1,000 selection texts")
    search.report(0, 1_000)
    second = stages.view()
    # a new count starts again at 0 %, under the words of its own attempt
    assert second.fraction == 0.0 and "attempt 2 of 9" in second.text and second.text != first.text
    assert second.eta == ESTIMATING


def test_the_terminal_shows_each_stage_and_its_time_left_without_flooding():
    clock = FakeClock()
    lines: list[str] = []
    progress = staged_progress(every_s=15.0, clock=clock, echo=lines.append)
    progress.say("Split 2,000 texts: 1,600 train, 200 dev, 200 test (seed 13).")
    frozen = progress.step(1, 3, "frozen layers", "texts")
    for done in range(0, 2_001, 100):
        frozen.report(done, 2_000)
        clock.now += 1.0
    assert lines[0].startswith("Split 2,000 texts") and lines[1] == "1 of 3: frozen layers"
    counts = [line for line in lines if "of 2,000 texts" in line]
    assert 2 <= len(counts) <= 3 and counts[-1] == "  1 of 3: frozen layers — 2,000 of 2,000 texts · finishing…"
    assert "about 5 s left" in counts[1]  # 1,500 of 2,000 after 15 s: 5 s left at that rate


def test_the_older_step_lines_keep_their_details_and_show_percent():
    clock = FakeClock()
    stages = StageClock(clock)
    progress = Progress(stages.report, stages.say)
    export = progress.stage(2, 3, "Building its ONNX version and checking it", 20, 75)
    export.say("Exporting to ONNX ...")
    export.report(1, 4)
    view = stages.view()
    assert view.text == "2 of 3: Building its ONNX version and checking it — Exporting to ONNX ... — 33 %"  # 20 + 55 / 4 of the whole
