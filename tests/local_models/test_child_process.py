"""Model work in a child process: what it returns and reports comes back, its failures keep their
words, cancelling ends it, and the fast forms of a trained part survive being stopped half-way
(nothing half-written is ever used; the next run resumes)."""

from __future__ import annotations

import os
import time

import pytest

from local_models.child_process import run_in_child
from local_models.errors import Cancelled, CorruptModel, ExportFailed
from local_models.progress import Progress


def counting(*, upto: int, progress: Progress) -> dict:
    progress.say("counting")
    for i in range(upto):
        progress.report(i + 1, upto)
    return {"counted": upto, "pid": os.getpid(), "nice": os.nice(0)}


def refusing(*, progress: Progress) -> None:
    raise CorruptModel("model.safetensors is damaged; download the model again.")


def dying(*, progress: Progress) -> None:
    os._exit(3)


def waiting(*, progress: Progress) -> None:
    progress.say("waiting")
    time.sleep(120)


def test_the_result_and_the_reports_come_back_from_a_lower_priority_child():
    reports, lines = [], []
    result = run_in_child(counting, {"upto": 5}, progress=Progress(lambda d, t: reports.append((d, t)), lines.append))
    assert result["counted"] == 5 and result["pid"] != os.getpid()
    assert result["nice"] >= os.nice(0) + 10 or result["nice"] == 19
    assert reports == [(i, 5) for i in range(1, 6)] and lines == ["counting"]


def test_a_failure_keeps_its_words_and_a_dead_child_is_reported():
    with pytest.raises(ExportFailed, match="model.safetensors is damaged; download the model again"):
        run_in_child(refusing, {})
    with pytest.raises(ExportFailed, match="stopped unexpectedly \\(exit code 3\\)"):
        run_in_child(dying, {})


def test_cancelling_ends_the_child():
    progress = Progress(on_message=lambda line: progress.cancel())  # cancelled as soon as it starts waiting
    started = time.monotonic()
    with pytest.raises(Cancelled):
        run_in_child(waiting, {}, progress=progress)
    assert time.monotonic() - started < 60  # not the child's 120 s: it was ended


@pytest.mark.slow
def test_fast_forms_stopped_half_way_leave_nothing_used_and_the_next_run_finishes(tmp_path, trigger_part_dir,
                                                                                 tiny_base_dir):
    from local_models.default_model import prepare_fast_forms, prepare_torch_form, prepared_fast_form
    from local_models.engine import load_engine

    cache = tmp_path / "cache"
    torch_form = prepare_torch_form(trigger_part_dir, cache, base_dir=tiny_base_dir, slug="trigger")
    assert prepared_fast_form(trigger_part_dir, cache, slug="trigger") is None
    arguments = {"part_dir": trigger_part_dir, "cache_dir": cache, "base_dir": tiny_base_dir, "slug": "trigger"}
    stop = Progress(on_message=lambda line: "Step 3 of 3" in line and stop.cancel())  # after the fp32 export
    with pytest.raises(Cancelled):
        run_in_child(prepare_fast_forms, arguments, progress=stop)
    # stopped after the fp32 export: nothing is used yet, unless the int8 step was already over (a part
    # without an int8 recipe refuses at once), and then the fp32 form with its reason is the final one
    after_stop = prepared_fast_form(trigger_part_dir, cache, slug="trigger")
    assert after_stop is None or (not after_stop.onnx_int8 and after_stop.onnx_dir is not None and after_stop.notes)
    lines = []
    prepared = run_in_child(prepare_fast_forms, arguments, progress=Progress(on_message=lines.append))
    assert not any("Step 2 of 3" in line for line in lines)  # the fp32 export was kept, not built again
    assert prepared.torch_dir == torch_form.torch_dir and prepared.onnx_dir is not None
    assert prepared_fast_form(trigger_part_dir, cache, slug="trigger") == prepared
    assert load_engine(prepared.onnx_dir).labels == load_engine(prepared.torch_dir).labels
