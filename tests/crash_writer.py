"""Writes examples until killed; the crash test (tests/app/test_crash.py) kills it with SIGKILL.

Prints a line only *after* each call returns, so every printed record must survive the kill.
"""

import sys

from app.core.desk import Desk
from app.core.domain import ModelOutput
from app.core.services.examples import Content


def main(data_dir: str, run: int) -> None:
    desk = Desk(data_dir)
    author = desk.people.by_name("Crash Writer") or desk.people.create("Crash Writer", "annotator")
    model = desk.models.register("crash model", "onnx", "f0" * 32)
    out = sys.stdout
    n = 0
    while True:
        n += 1
        key = f"r{run}-e{n}"
        draft = desk.examples.start_draft(author.id, "hate_speech")
        for k in range(3):
            text = f"{key} draft {k} 😀 مرحبا"
            desk.examples.save_draft(draft.id, inputs={"text": text}, true_label="hate", time_spent_ms=k * 100)
            out.write(f"DRAFT {draft.id} {k}\n")
            out.flush()
        content = Content({"text": f"{key} final ☠️"}, "hate",
                          meta={"hate_type": "derogation", "target_groups": ["women", "Sikhs"],
                                "label_explanation": "test"})
        output = ModelOutput(model.id, model.sha256, "not hate", {"hate": 0.3, "not hate": 0.7}, 1.5)
        example = desk.examples.submit(draft.id, [output], content, time_spent_ms=900)
        out.write(f"SUBMITTED {example.id} {key}\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
