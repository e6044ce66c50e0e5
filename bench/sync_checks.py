"""The server-side checks of one pushed record, at their worst (DESIGN.md §5: any legal record
≤ 1 s and ≤ 100 MB): the assistance edit distance (measured before the write transaction,
within the task's bound) and the fooling judgement. Part of ``make bench --only sync``.

A real ``dynadesk serve run`` process on SQLite; its peak RSS is read from /proc (VmHWM) before
and after the worst pushes. The reference is the full-matrix alignment the server used before
(what ``app.core.text.word_edits`` computes for the desk's diff views), timed in this process on the
same texts.
"""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path

import httpx

from bench.common import BenchContext, Result, percentile, time_calls

GROUP = "sync"
BUDGET_S = 1.0
BUDGET_MB = 100.0
WIDE_SHA = "cd" * 32


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (Linux /proc VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc (not Linux?)")


def _publish(url: str, owner, work: Path) -> None:
    """The basics with round 1 run with the assistant on, and a task whose written input may hold
    200,000 characters (far over the distance's cap, ``MAX_DISTANCE_CHARS``)."""
    from app.core.domain import utcnow
    from tests.sync.helpers import basics_records

    records = [dict(r) for r in basics_records(work)]
    for r in records:
        if r["record"] == "round" and r["number"] == 1:
            r["settings"] = {**r.get("settings", {}), "assistant": "on"}
    task = next(r for r in records if r["record"] == "task")
    from app.core.tasks.definition import TaskDefinition

    definition = TaskDefinition.model_validate(task["definition"])
    wide = definition.model_copy(update={"code": "wide_text", "name": "Wide text", "inputs": [
        f.model_copy(update={"max_chars": 200_000}) for f in definition.inputs]})
    now = utcnow().isoformat()
    model = {"record": "model", "id": str(uuid.uuid4()), "name": "wide model", "format": "onnx", "sha256": WIDE_SHA,
             "label_map": {}, "task": "wide_text", "created_at": now, "updated_at": now, "revision": 1}
    records += [
        {"record": "task", "id": str(uuid.uuid4()), "code": "wide_text", "name": wide.name,
         "definition": wide.model_dump(mode="json"), "fingerprint": wide.fingerprint(), "created_at": now,
         "updated_at": now, "revision": 1},
        model,
        {"record": "round", "id": str(uuid.uuid4()), "task": "wide_text", "number": 1, "fooled_rule": "mean",
         "target_models": [model["id"]], "settings": {"assistant": "on"}, "created_at": now, "updated_at": now,
         "revision": 1},
    ]
    response = httpx.post(f"{url}/v1/publish", json={"records": records},
                          headers={"Authorization": f"Bearer {owner.token}"}, timeout=120)
    assert response.status_code == 200, response.text[:500]
    assert {r["status"] for r in response.json()["results"]} <= {"stored", "already_stored"}, response.text[:500]


def _worst_texts(chars: int) -> tuple[str, str]:
    """Two texts of ``chars`` characters with nothing in common, made of the words the one
    segmentation spends longest on (a letter and an emoji apart, with no space between)."""
    return ("x❤️" * chars)[:chars], ("y😀" * chars)[:chars]


def _records(author, kind: str, n: int) -> list[list[dict]]:
    """``n`` requests of ``kind`` (each record new, so each is measured)."""
    from app.core.assist.provenance import MAX_APPLIED_CHARS, MAX_DISTANCE_CHARS
    from app.core.limits import MAX_FIELD_BYTES
    from tests.sync.helpers import MODEL_SHA
    from tests.sync.test_server import example

    claim = {"arm": "on", "session": 1, "applied": True, "generator": "rules", "edit_type": "negation"}
    bulk = "z" * (MAX_FIELD_BYTES - 200)  # free-form fields at their bound too: parsing them is part of the push
    requests = []
    for i in range(n):
        if kind == "hate":
            text, applied = _worst_texts(5000)
            records = [example(author, text[:-len(str(i))] + str(i), assistance={**claim, "applied_text": applied},
                               origin={"kind": "scratch", "note": bulk}, edit_ops=[{"op": "keep", "text": bulk}])]
        elif kind == "wide":  # the whole text the task allows, too long to measure, and a suggestion that is not
            text = (_worst_texts(200_000)[0])
            applied = _worst_texts(MAX_DISTANCE_CHARS)[1]
            records = [example(author, text[:-len(str(i))] + str(i), task="wide_text",
                               assistance={**claim, "applied_text": applied},
                               outputs=[{"model": str(uuid.uuid4()), "model_sha256": WIDE_SHA, "label": "not hate",
                                         "probabilities": {"hate": 0.1, "not hate": 0.9}}])]
        else:  # the attack: three 50,000-word suggestions against 1,000-word texts in one push
            applied = ("a " * 50_000)[:MAX_APPLIED_CHARS]
            records = [example(author, "b " * 999 + f"r{i}x{k}", assistance={**claim, "applied_text": applied},
                               outputs=[{"model": str(uuid.uuid4()), "model_sha256": MODEL_SHA, "label": "not hate",
                                         "probabilities": {"hate": 0.1, "not hate": 0.9}}]) for k in range(3)]
        requests.append(records)
    return requests


def worst_record_push(ctx: BenchContext) -> list[Result]:
    from app.core.assist.provenance import MAX_DISTANCE_CHARS
    from app.core.text import word_distance, word_edits, words
    from tests.sync.helpers import ProcessServer, add_account, server_database

    work = ctx.work_dir / "worst-record"
    runs = 3 if ctx.quick else 10
    url = f"sqlite:///{work / 'server' / 'server.sqlite'}"
    db = server_database(url)
    owner = add_account(db, "Olga Owner", "owner", "A")
    ann = add_account(db, "Ann Annotator", "annotator", "A")
    server = ProcessServer(url, work / "server")
    server.start()
    results: list[Result] = []
    try:
        _publish(server.url, owner, work)
        assert server.process is not None
        pid = server.process.pid
        headers = {"Authorization": f"Bearer {ann.token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=300) as http:
            def push(records: list[dict]) -> tuple[float, dict]:
                started = time.perf_counter()
                response = http.post("/v1/push", json={"records": records})
                elapsed = time.perf_counter() - started
                assert response.status_code == 200, response.text[:500]
                body = response.json()
                assert {r["status"] for r in body["results"]} == {"stored"}, body
                return elapsed, body

            push(_records(ann, "hate", 1)[0])  # warm: the first request imports and compiles
            baseline = _peak_rss_mb(pid)
            cases = [("hate", "worst legal record, hate speech (5,000-character text and suggestion, 64 KiB "
                              "origin and edit_ops)"),
                     ("wide", f"worst legal record of a task allowing 200,000 characters (a 200,000-character "
                              f"text; distances measured up to {MAX_DISTANCE_CHARS:,})"),
                     ("attack", "reported attack: 3 x 50,000-word suggestions vs 1,000-word texts, one push")]
            for kind, name in cases:
                times, notes = [], ""
                for records in _records(ann, kind, runs):
                    elapsed, body = push(records)
                    times.append(elapsed)
                    notes = "; ".join(sorted({r["reason"] or "distance measured" for r in body["results"]}))
                results.append(Result(
                    GROUP, f"push of the {name}", "s", median=statistics.median(times), p95=percentile(times, 0.95),
                    n=len(times), budget=f"<= {BUDGET_S:g} s", within_budget=max(times) <= BUDGET_S,
                    notes=f"HTTP round trip to a real server (SQLite); server says: {notes[:160]}"))
            peak = _peak_rss_mb(pid)
        results.append(Result(
            GROUP, "server peak RSS growth over those pushes", "MB", median=peak - baseline, n=1,
            budget=f"<= {BUDGET_MB:g} MB", within_budget=peak - baseline <= BUDGET_MB,
            notes=f"VmHWM {baseline:.0f} MB after a warm-up push, {peak:.0f} MB after all worst pushes"))
    finally:
        server.stop()
        db.close()

    # side by side, in this process: the bounded measure and the full matrix the server used before
    original, edited = _worst_texts(5000)
    bounded = time_calls(lambda: word_distance(original, edited, max_chars=5000), 3 if ctx.quick else 10, warmup=1)
    a, b = [w.text for w in words(original)], [w.text for w in words(edited)]
    started = time.perf_counter()
    _ops, reference_distance = word_edits(original, edited)  # the desk's diff: segmentation and a full matrix
    reference_ms = (time.perf_counter() - started) * 1000
    assert word_distance(original, edited, max_chars=5000) == reference_distance
    results.append(Result(
        GROUP, "edit distance of the worst hate-speech pair (5,000 characters each)", "ms",
        median=statistics.median(bounded), p95=percentile(bounded, 0.95), n=len(bounded),
        notes=f"segmentation + rapidfuzz over word ids; reference full-matrix alignment (before): "
              f"{reference_ms:,.0f} ms for {len(a):,} x {len(b):,} words, "
              f"{reference_ms / statistics.median(bounded):.0f}x slower; same distance {reference_distance:,}"))
    results += _fooling_cost(ctx)
    return results


def _fooling_cost(ctx: BenchContext) -> list[Result]:
    """The server's judgement (``judging.judge``) of the worst legal outputs: extractive QA with the
    model's and the writer's answers as long as the context may be (50,000 characters), and a
    classification output; one target model each."""
    from app.core.domain import Span
    from app.core.tasks.definition import builtin_tasks_dir, load_catalog
    from sync.server.store.judging import judge

    catalog = load_catalog(builtin_tasks_dir())
    qa, hate = catalog["extractive_qa"], catalog["hate_speech"]
    span_chars = next(f.max_chars for f in qa.inputs if f.name == qa.answer.span_of) if qa.answer else 0
    truth = (" ".join(f"w{i}," for i in range(span_chars)))[:span_chars]
    said = (" ".join(f"v{i}." for i in range(span_chars)))[:span_chars]
    sha = "ab" * 32
    qa_out = [{"model": str(uuid.uuid4()), "model_sha256": sha, "label": said,
               "answer": {"start": 0, "end": len(said), "text": said}}]
    hate_out = [{"model": str(uuid.uuid4()), "model_sha256": sha, "label": "not hate",
                 "probabilities": {"hate": 0.1, "not hate": 0.9}}]
    n = 5 if ctx.quick else 20
    qa_ms = time_calls(lambda: judge(qa, [sha], "mean", None, Span(0, len(truth), truth), qa_out), n, warmup=1)
    hate_ms = time_calls(lambda: judge(hate, [sha], "mean", "hate", None, hate_out), n * 10)
    return [
        Result(GROUP, f"fooling judgement, worst extractive QA output ({span_chars:,}-character answers)", "ms",
               median=statistics.median(qa_ms), p95=percentile(qa_ms, 0.95), n=len(qa_ms),
               budget=f"p95 <= {BUDGET_S * 1000:g} ms", within_budget=percentile(qa_ms, 0.95) <= BUDGET_S * 1000,
               notes="per target model; answers longer than the context may be are refused unjudged"),
        Result(GROUP, "fooling judgement, a classification output", "ms", median=statistics.median(hate_ms),
               p95=percentile(hate_ms, 0.95), n=len(hate_ms),
               notes="outputs with unknown labels or probabilities outside 0-1 are refused unjudged"),
    ]
