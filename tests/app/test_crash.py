"""Kill a writer with SIGKILL at random moments; nothing acknowledged may be lost or torn."""

import os
import random
import signal
import subprocess
import sys
import threading
import uuid

import pytest
from sqlalchemy import select

from app.core.desk import Desk
from app.core.storage.models import Example, ExampleFacet
from tests.conftest import ROOT

KILLS = 24


@pytest.mark.slow
def test_killed_writers_lose_nothing_they_acknowledged(tmp_path):
    data_dir = tmp_path / "desk"
    Desk(data_dir).close()
    rng = random.Random(20261122)
    submitted: dict[str, str] = {}
    drafts: dict[str, int] = {}  # draft id -> last acknowledged save
    # Each writer is forked from one process that has imported the app (tests/crash_writer.py --forks):
    # a process of its own, killed with SIGKILL, without paying the imports 24 times. One BLAS thread,
    # so the fork copies a single-threaded process.
    forks = subprocess.Popen([sys.executable, "-m", "tests.crash_writer", "--forks", str(data_dir)], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                                  "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    try:
        for run in range(KILLS):
            fifo = tmp_path / f"writer-{run}.out"
            os.mkfifo(fifo)
            forks.stdin.write(f"{run} {fifo}\n")
            forks.stdin.flush()
            started = forks.stdout.readline()
            assert started.startswith("PID "), started + forks.stderr.read()
            pid = int(started.split()[1])
            lines: list[str] = []
            first_line = threading.Event()

            def read(fifo=fifo, lines=lines, first_line=first_line):
                with open(fifo, encoding="utf-8") as stream:
                    for line in stream:
                        lines.append(line)
                        first_line.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert first_line.wait(60), "writer never wrote"
            threading.Event().wait(rng.uniform(0.02, 0.8))  # let it run into the middle of some write
            os.kill(pid, signal.SIGKILL)
            ended = forks.stdout.readline()
            reader.join(10)
            assert ended.split() == ["EXIT", str(-signal.SIGKILL)], ended
            for line in lines:
                if not line.endswith("\n"):
                    continue  # torn by the kill: not an acknowledgement
                kind, record_id, value = line.split(maxsplit=2)
                if kind == "SUBMITTED":
                    submitted[record_id] = value.strip()
                    drafts.pop(record_id, None)
                else:
                    drafts[record_id] = max(drafts.get(record_id, -1), int(value))
    finally:
        forks.stdin.close()
        forks.wait(30)

    assert len(submitted) >= KILLS  # the writer got real work done between kills
    with Desk(data_dir) as desk:
        assert desk.db.integrity_check() == "ok"
        for example_id, key in submitted.items():
            example = desk.examples.get(uuid.UUID(example_id))
            assert example.status == "submitted"
            assert example.text == f"{key} final ☠️"
            assert example.time_spent_ms == 900 and example.model_fooled is True
            assert [(o.label, o.probabilities) for o in example.outputs] == [("not hate", {"hate": 0.3, "not hate": 0.7})]
            with desk.db.read() as session:
                facets = set(session.scalars(select(ExampleFacet.value).where(ExampleFacet.example_id == example.id)))
            assert facets == {"derogation", "women", "Sikhs"}
        offered = {str(d.id): d for d in desk.examples.drafts(desk.people.by_name("Crash Writer").id)}
        late_submits = 0
        for draft_id, saved in drafts.items():
            if draft_id not in offered:
                # killed after its submit committed but before the writer could say so
                example = desk.examples.get(uuid.UUID(draft_id))
                assert example.status == "submitted" and example.text.endswith(" final ☠️") and example.outputs
                late_submits += 1
                continue
            draft = offered[draft_id]  # an unfinished example is offered back after the crash
            k = int(draft.text.split(" draft ")[1].split()[0])
            assert k >= saved and draft.text.endswith(" 😀 مرحبا")  # complete, never torn
        assert len(drafts) - late_submits > 0  # some kills did land in the middle of drafting
        with desk.db.read() as session:
            torn = session.scalars(select(Example).where(Example.status == "submitted", ~Example.outputs.any())).all()
        assert torn == []
