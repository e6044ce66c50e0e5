"""The workspace as an analyst feels it, with the real default model:

- cold start: a new process until the window is shown and usable, and until the first
  prediction can be made (the target model loaded), on a desk that was set up before;
- first start: a new process on a fresh data folder, from the window shown until typed text gets
  its first prediction (from the PyTorch form), and until the faster ONNX form, prepared in the
  background, answers;
- keystroke to prediction shown: a key press in the editor until the prediction panel shows
  the model's answer for exactly that text (the service keeps no debounce, so this is all of it);
  then again with the heatmap following the text ("Follow the text": every keystroke also asks
  for an attribution, which runs on the service's explanation lane), where the prediction must
  not wait for the attributions, and the heatmap catches up when typing pauses; and with the
  writing assistant asked for suggestions every few keystrokes (generated and checked on the
  same explanation lane), where the prediction must not wait for them either.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import BenchContext, Result, summarise

GROUP = "workspace"
ROOT = Path(__file__).resolve().parent.parent
WORDS = ("they the people from over there never really said that my neighbours and friends always "
         "come to help when it rains in the city but some folks online keep telling lies about refugees "
         "women immigrants and everyone else who lives here today").split()

COLD_START = r"""
import json, sys, time
started = float(sys.argv[1])
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.core.desk import Desk
from app.gui.main_window import MainWindow
desk = Desk(sys.argv[2])
window = MainWindow(desk)
window.show()
app.processEvents()
shown = time.time()
ws = window.workspace
while ws.loaded is None:
    app.processEvents()
    time.sleep(0.002)
loaded = time.time()
window.close()
desk.close()
print(json.dumps({"window_s": shown - started, "model_s": loaded - started, "device": ws.loaded.devices[0]}))
"""

FIRST_START = r"""
import json, sys, time
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.core.desk import Desk
from app.gui.main_window import MainWindow
desk = Desk(sys.argv[1])
desk.settings.acknowledged_warnings = ["hate_speech"]
desk.save_settings()
window = MainWindow(desk)
window.show()
app.processEvents()
shown = time.time()
cpu_at_shown = time.process_time()  # the desk process's CPU time, all threads (not the export's child)
window.prepare_first_start()
ws = window.workspace
box = ws.view.editor.fields["text"]
box.setFocus()
QTest.keyClicks(box, "I love spending time with my family")

def wait(done):
    deadline = time.time() + 600
    while not done() and time.time() < deadline:
        app.processEvents()
        time.sleep(0.005)
    return time.time()

def answered():
    return ws.last_prediction is not None and ws._current_prediction_matches() and not ws.view.prediction.stale.isVisible()

first = wait(answered)
first_cpu = time.process_time() - cpu_at_shown
first_form = ws.loaded.formats[0]
fast_loaded = wait(lambda: ws.loaded is not None and ws.loaded.formats[0] == "onnx")
QTest.keyClicks(box, " and friends")
fast = wait(answered)
window.close()
desk.close()
print(json.dumps({"first_s": first - shown, "first_cpu_s": first_cpu, "first_form": first_form, "fast_s": fast - shown,
                  "fast_name": ws.loaded.names[0]}))
"""


def _prepare_desk(ctx: BenchContext) -> Path:
    from app.core.desk import Desk
    from app.core.services.target_models import adopt_default_model

    data = ctx.work_dir / "desk"
    with Desk(data) as desk:
        settings = desk.settings
        settings.acknowledged_warnings = ["hate_speech"]
        desk.save_settings()
        if adopt_default_model(desk) is None:
            raise RuntimeError("the bench desk did not take the default model")
        from app.core.services.rounds import parse_settings

        lead = desk.people.create("Bench Lead", "lead")
        round_ = desk.tasks.round("hate_speech")
        desk.rounds.update(round_.id, lead.id, settings=parse_settings({"assistant": "on"}))
    return data


def _cold_starts(data: Path, runs: int) -> tuple[list[float], list[float], str]:
    window, model, device = [], [], ""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    for _ in range(runs):
        started = time.time()
        out = subprocess.run([sys.executable, "-c", COLD_START, repr(started), str(data)], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=300, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        window.append(figures["window_s"])
        model.append(figures["model_s"])
        device = figures["device"]
    return window, model, device


def _first_starts(ctx: BenchContext, runs: int) -> tuple[list[float], list[float], list[float], str, str]:
    """Each run: a fresh data folder and a new process (so nothing is cached or imported yet)."""
    first, cpu, fast, first_form, fast_name = [], [], [], "", ""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    for run in range(runs):
        data = ctx.work_dir / f"fresh-{run}"
        out = subprocess.run([sys.executable, "-c", FIRST_START, str(data)], capture_output=True, text=True,
                             cwd=ROOT, env=env, timeout=900, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        first.append(figures["first_s"])
        cpu.append(figures["first_cpu_s"])
        fast.append(figures["fast_s"])
        first_form, fast_name = figures["first_form"], figures["fast_name"]
    return first, cpu, fast, first_form, fast_name


def _wait_until(app, condition) -> None:
    """Let the GUI thread sleep in its event loop, as it does while an annotator types, rather
    than spin (a spinning loop would take a core from the model); a 1 ms timer bounds the wait."""
    from PySide6.QtCore import QEventLoop, QTimer

    tick = QTimer()
    tick.start(1)
    while not condition():
        app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    tick.stop()


# Keystrokes come this far apart (ms), as a fast typist's do: time in which an attribution of
# the text so far is under way when the next key comes.
TYPING_GAP_MS = (60, 180)


SUGGEST_EVERY = 5  # keystrokes between two requests for suggestions (a writer asking often)


def _after(owner, name: str, record) -> None:
    """Run ``record(answer)`` after ``owner``'s handler ``name`` (a request's callback, looked up when asked)."""
    handler = getattr(owner, name)

    def handled(answer) -> None:
        handler(answer)
        record(answer)

    setattr(owner, name, handled)


def _keystrokes(data: Path, n: int, follow: bool = False, suggest: bool = False) -> tuple[list[float], str, dict]:
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from app.core.desk import Desk
    from app.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    desk = Desk(data)
    window = MainWindow(desk)
    window.show()
    ws = window.workspace
    shown: list[float] = []
    explained: list[object] = []
    # each answer goes to the one handler its request named: timed right after that handler showed it
    _after(ws, "_predicted", lambda _r: shown.append(time.perf_counter()))
    _after(ws.pairs, "attributed", explained.append)
    suggested: list[object] = []
    _after(ws.assist, "_arrived", suggested.append)
    deadline = time.time() + 120
    while (ws.loaded is None or "text" not in ws.view.editor.fields) and time.time() < deadline:
        app.processEvents()  # the task's fields are laid out once its definition is read on the worker
    if ws.view.warning.isVisible():  # the task's content warning, once per desk
        ws.view.warning.primary.click()
    box = ws.view.editor.fields["text"]
    ws.view.attribution.pin.setChecked(follow)
    if suggest:
        _wait_until(app, lambda: ws.session.assistant_on)
        ws.view.choose_label("hate")  # suggestions keep the writer's label
    catch_up: list[float] = []
    rng = random.Random(3)
    text = " ".join(rng.choice(WORDS) for _ in range(400))
    samples = []
    box.setFocus()
    gaps = random.Random(5)
    start = time.perf_counter()
    for i in range(n + 10):
        if len(box.toPlainText()) > 200:  # keep texts of realistic length (≤ 64 tokens)
            box.clear()
            app.processEvents()
        next_key = start + gaps.uniform(*TYPING_GAP_MS) / 1000
        _wait_until(app, lambda next_key=next_key: time.perf_counter() >= next_key)
        before = len(shown)
        start = time.perf_counter()
        QTest.keyClick(box, text[i % len(text)])
        if suggest and i % SUGGEST_EVERY == 0:
            ws.assist.suggest()  # after the key: its prediction is asked first, the suggestions behind it
        _wait_until(app, lambda before=before: len(shown) > before and ws._current_prediction_matches()
                    and not ws.view.prediction.stale.isVisible())
        if i >= 10:  # warm-up: first calls allocate
            samples.append((time.perf_counter() - start) * 1000)
        if follow and i % 25 == 24:  # a pause in typing: until the heatmap shows this very text
            paused = time.perf_counter()
            _wait_until(app, lambda: bool(explained) and explained[-1].inputs == box.toPlainText()
                        and not ws.view.attribution.stale.isVisible())
            catch_up.append((time.perf_counter() - paused) * 1000)
    device = ws.loaded.devices[0]
    extra = {"attributions_shown": len(explained), "catch_up_ms": catch_up, "suggestion_sets": len(suggested),
             "method": explained[-1].attribution.method if explained else None}
    window.close()
    window.deleteLater()
    app.processEvents()
    desk.close()
    return samples, device, extra


def run(ctx: BenchContext) -> list[Result]:
    data = _prepare_desk(ctx)
    runs = 3 if ctx.quick else 7
    window_s, model_s, device = _cold_starts(data, runs)
    samples, key_device, _ = _keystrokes(data, 40 if ctx.quick else 300)
    following, _, extra = _keystrokes(data, 50 if ctx.quick else 300, follow=True)
    suggesting, _, assisted = _keystrokes(data, 50 if ctx.quick else 300, suggest=True)
    first_runs = 1 if ctx.quick else 3
    first_s, first_cpu, fast_s, first_form, fast_name = _first_starts(ctx, first_runs)
    load = os.getloadavg()[0]
    catch_up = extra["catch_up_ms"]
    return [
        Result(GROUP, "cold start to a usable window (new process)", "s", statistics.median(window_s),
               max(window_s), runs, budget="<= 3 s", within_budget=statistics.median(window_s) <= 3,
               notes=f"p95 column: slowest of {runs}; includes Python, Qt and the database"),
        Result(GROUP, "cold start until the target model answers", "s", statistics.median(model_s), max(model_s),
               runs, notes=f"default model on {device}; the window is usable meanwhile"),
        Result(GROUP, "first start (fresh data folder, new process): window shown to the first prediction", "s",
               statistics.median(first_s), max(first_s), first_runs, budget="<= 5 s",
               within_budget=statistics.median(first_s) <= 5,
               notes=f"p95 column: slowest of {first_runs}; typed text answered by the {first_form} form; the desk "
                     f"process used {statistics.median(first_cpu):.1f} s of CPU meanwhile (what a quiet machine "
                     f"needs, about); load average {load:.1f}"),
        Result(GROUP, "first start: window shown until the faster form answers", "s", statistics.median(fast_s),
               max(fast_s), first_runs,
               notes=f"{fast_name}, prepared in a child process at lower priority while the PyTorch form answers"),
        summarise(GROUP, "keystroke to prediction shown", samples, budget_p95_ms=20,
                  notes=f"real key presses {TYPING_GAP_MS[0]}-{TYPING_GAP_MS[1]} ms apart, default model on "
                        f"{key_device}, texts <= 200 chars; load average {load:.1f}"),
        summarise(GROUP, "keystroke to prediction shown, heatmap following the text", following, budget_p95_ms=20,
                  notes=f"as above, every keystroke also asks for {extra['method']} attributions (their own lane); "
                        f"{extra['attributions_shown']} heatmaps shown for {len(following) + 10} keystrokes"),
        summarise(GROUP, "keystroke to prediction shown, suggestions asked for while typing", suggesting,
                  budget_p95_ms=20,
                  notes=f"as above, suggestions asked for every {SUGGEST_EVERY} keystrokes (explanation lane; a newer "
                        f"request stops the running one); {assisted['suggestion_sets']} suggestion sets shown for "
                        f"{len(suggesting) + 10} keystrokes"),
        summarise(GROUP, "typing pause to heatmap shown for the text", catch_up,
                  notes="every 25 keystrokes; includes finishing an attribution already running"),
    ]
