"""Writes examples until killed; the crash test (tests/app/test_crash.py) kills it with SIGKILL.

Prints a line only *after* each call returns, so every printed record must survive the kill.

``--forks DATA_DIR``: imports once, then for each line ``RUN FIFO`` read from stdin forks a writer
whose output goes to the named pipe FIFO, says ``PID <pid>``, and once the writer is dead
``EXIT <returncode>`` (``-9`` for SIGKILL). Each writer is a process of its own, with its own
database connections (the parent never opens the database); it skips only the seconds of imports.
"""

import os
import sys

from app.core.desk import Desk
from app.core.domain import ModelOutput
from app.core.tasks.content import Content


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


def forks(data_dir: str) -> None:
    for line in sys.stdin:
        run, fifo = line.split(maxsplit=1)
        pid = os.fork()
        if pid == 0:
            try:
                sys.stdout = open(fifo.strip(), "w", encoding="utf-8")
                main(data_dir, int(run))
            finally:
                os._exit(1)  # never back into the parent's loop
        print(f"PID {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"EXIT {os.waitstatus_to_exitcode(status)}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--forks":
        forks(sys.argv[2])
    else:
        main(sys.argv[1], int(sys.argv[2]))
