"""The Next round dialog while a candidate trains: the stage in words with its own counts, the time left at
that stage's rate, and the choice to prepare the int8 form later. Run: python docs/make_next_round_progress_screenshot.py"""

from screenshot_kit import OUT, application, wait

from app.core.next_round.inputs import BaseDefaults, RoundCount, TrainDefaults
from app.views.next_round import train_setup
from app.views.stage_progress import StageClock
from widgets.next_round_dialog import NextRoundDialog


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def main() -> None:
    app = application()
    base = BaseDefaults("/data/davidson2017/labeled_data.csv", "tweet", "class",
                        {"0": "hate", "1": "not hate", "2": "not hate"}, True, "from the target's own training data")
    setup = train_setup("hate_speech", "Hate speech", [RoundCount(1, "open", 2297, 235, 0, 0, {"hatecheck": 2297})],
                        TrainDefaults(base, "target", "auto", False, (1,), "Hate speech R1, ONNX int8", ""),
                        "/home/lee/.local/share/dynadesk/candidates", "0=hate,1=not hate,2=not hate")
    dialog = NextRoundDialog()
    dialog.resize(1366, 768)
    dialog.show_setup(setup)
    dialog.int8_later.setChecked(True)
    dialog.show()
    dialog.set_running(True, "Training…")
    clock = Clock()
    stages = StageClock(clock)
    stages.say("Split 27,067 texts: 19,826 train, 2,478 dev, 2,479 test (seed 13).")
    stages.say("1 of 3: frozen layers (texts)")
    stages.say("1 of 3: frozen layers — the 5 frozen layer(s) once over 27,067 texts, the cached ones read back")
    stages.report(0, 27_067)
    clock.now = 61.0
    stages.report(12_416, 27_067)
    dialog.show_progress(stages.view())
    wait(300)
    dialog.grab().save(str(OUT / "next-round-1-training-stages.png"))
    app.processEvents()


if __name__ == "__main__":
    main()
