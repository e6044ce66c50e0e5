"""Screenshot of the Dashboard's writing-assistant section, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_assistant_split_screenshots.py

A simulated team (seeded; writes only a temporary folder): round 1 ran without the assistant, round 2
as A-B. Five writers each sit eight sessions in round 2, the arm of each drawn by the desk's own
``session_arm``; their examples fool the model, get a lead's decision and take writing time at rates
chosen for the picture, not measured. Shown per annotator at a laptop's 1366×768. Then the round
dialog where a lead sets the round's writing assistant.
"""

import random
import sys
import tempfile
import uuid
from pathlib import Path

from screenshot_kit import OUT, application, lead_desk, show_window, wait, wait_until

WRITERS = ("Amara Okafor", "Bruno Silva", "Chen Wei", "Dilnoza Karimova", "Eitan Levi")
SESSIONS, PER_SESSION = 8, 6


def populate(desk) -> None:
    from app.core.assist.arms import round_key, session_arm
    from app.core.assist.types import Assistance
    from app.core.services.rounds import parse_settings
    from tests.conftest import hate_content, hate_output

    rng = random.Random(20)
    lead = desk.current_person_id
    task = desk.tasks.task("hate_speech")
    model = desk.models.register("distilroberta-hate r1", "hf-torch", "ab" * 32, task_id=task.id)
    desk.rounds.set_models(desk.tasks.round("hate_speech", 1).id, lead, [model.id])
    generators = [("obfuscation", "leetspeak"), ("obfuscation", "homoglyph"), ("substitution", "word_swap"),
                  ("rules", "negation"), ("rules", "group_swap")]
    n = 0
    writers = {name: (desk.people.create(name, "annotator", person_id=uuid.UUID(int=rng.getrandbits(128))).id,
                      rng.uniform(0.25, 0.45)) for name in WRITERS}  # seeded ids: the same draws every run
    for writer, skill in writers.values():
        for _ in range(4):  # a few examples from round 1, before the assistant: outside the split
            n += 1
            desk.examples.create(writer, "hate_speech", hate_content(f"round one text {n}", "hate"),
                                 [hate_output(model, "not hate" if rng.random() < skill else "hate")],
                                 round_number=1, time_spent_ms=rng.randint(40, 150) * 1000)
    round2 = desk.rounds.open_next("hate_speech", lead, [model.id])
    desk.rounds.update(round2.id, lead, settings=parse_settings({"assistant": "ab"}))
    for name, (writer, skill) in writers.items():
        for session in range(1, SESSIONS + 1):
            arm = session_arm("ab", writer, session, round_key=round_key("hate_speech", 2))
            for _ in range(PER_SESSION):
                n += 1
                applied = arm == "on" and rng.random() < 0.6
                fooled = rng.random() < skill + (0.2 if applied else 0.05 if arm == "on" else 0)
                text = f"example {n} by {name}"
                generator, edit_type = rng.choice(generators)
                assistance = (Assistance(arm=arm, session=session, applied=True, generator=generator,
                                         edit_type=edit_type, applied_text=text) if applied
                              else Assistance(arm=arm, session=session))
                seconds = rng.randint(25, 90) if applied else rng.randint(45, 160)
                example = desk.examples.create(writer, "hate_speech", hate_content(text, "hate"),
                                               [hate_output(model, "not hate" if fooled else "hate")], round_number=2,
                                               time_spent_ms=seconds * 1000, assistance=assistance)
                if rng.random() < 0.7:  # the lead decides most of them; machine-made edits are rejected more
                    if rng.random() < (0.22 if applied else 0.1):
                        desk.validation.validate(example.id, lead, "incorrect", corrected_label="not hate",
                                                 reason="not hateful", mode="lead")
                    else:
                        desk.validation.validate(example.id, lead, "correct", mode="lead")


def round_dialog(window) -> None:
    from PySide6.QtGui import QAction

    from widgets.round_dialog import RoundDialog

    window.findChild(QAction, "rounds").trigger()
    wait_until(lambda: window.findChild(RoundDialog) is not None)
    dialog = window.findChild(RoundDialog)
    wait_until(lambda: dialog.status.text().startswith("<b>Round 2</b>"))
    wait(300)
    dialog.grab().save(str(OUT / "round-dialog-assistant.png"))
    print(OUT / "round-dialog-assistant.png")
    dialog.close()


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(Path(scratch) / "desk")
        populate(desk)
        desk.settings.last_task = "hate_speech"
        window = show_window(desk, 1366, 768)
        view, controller = window.dashboard_view, window.dashboard
        shown = []
        controller.assistant.updated.connect(lambda: shown.append(True))
        window.tabs.setCurrentWidget(view)
        view.sections.setCurrentWidget(view.assistant)
        wait_until(lambda: shown)
        wait(500)
        name = sys.argv[1] if len(sys.argv) > 1 else "assistant_split.png"
        window.grab().save(str(OUT / name))
        print(OUT / name)
        round_dialog(window)
        window.close()
        desk.close()


if __name__ == "__main__":
    main()
