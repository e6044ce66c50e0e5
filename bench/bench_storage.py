"""Review queries over 100,000 examples (DESIGN.md §5: filter, sort, statistics ≤ 100 ms each),
and the cost of one submit through the unit of work."""

from __future__ import annotations

import random
import time
import uuid
from datetime import timedelta

from sqlalchemy import insert

from app.core.desk import Desk
from app.core.domain import ModelOutput, utcnow
from app.core.services.review import ExampleFilter
from app.core.storage.models import Example, ExampleFacet, ModelOutputRow
from app.core.tasks.content import Content
from bench.common import BenchContext, Result, summarise, time_calls

BUDGET_MS = 100
SEARCHES = {
    "full-text search, frequent word: count + page": "they",
    "full-text search, topic word: count + page": "refugees",
    "full-text search, two words: count + page": "honestly vermin",
    "full-text search, one emoji (substring path): count + page": "🙄",
}
TOPIC_WORDS = ("they people women immigrants refugees country should never always love hate work family city night "
         "music football vermin lazy brilliant kind rude polite neighbours vote school church mosque synagogue "
         "really honestly maybe clearly not no yes 😀 🙄 ❤️ مرحبا שלום café naïve").split()
TYPES = ["animosity", "derogation", "dehumanization", "threatening language", "support for hateful entities"]
SYLLABLES = "ka lo mi ra ne to su vi da pe gu ho zi ba fe".split()


def vocabulary(rng: random.Random, size: int = 5000) -> tuple[list[str], list[float]]:
    """Pseudo-words with Zipf-distributed frequencies, as in real text; the topic words sit at
    ranks 10 to ~600, so that searching for one of them hits a few percent of examples."""
    words = list(dict.fromkeys("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
                               for _ in range(size * 2)))[:size]
    for i, word in enumerate(TOPIC_WORDS):
        words.insert(10 + i * 12, word)
    weights = [1 / (rank + 1) ** 1.05 for rank in range(len(words))]
    total, running, cumulative = sum(weights), 0.0, []
    for weight in weights:
        running += weight / total
        cumulative.append(running)
    return words, cumulative


GROUPS = ["women", "trans people", "gay people", "black people", "disabled people", "Muslims", "Jewish people",
          "immigrants", "refugees"]


def fill(desk: Desk, n: int, rng: random.Random) -> None:
    task = desk.tasks.task("hate_speech")
    rounds = [desk.tasks.get_or_create_round("hate_speech", number).id for number in (1, 2, 3, 4)]
    people = [desk.people.create(f"Annotator {i:02d}", "annotator").id for i in range(50)]
    models = [desk.models.register(f"model {i}", "onnx", f"{i:02d}" * 32) for i in range(2)]
    words, cumulative = vocabulary(rng)
    start = utcnow() - timedelta(days=60)
    batch = 10_000
    for offset in range(0, n, batch):
        examples, outputs, facets = [], [], []
        for i in range(offset, min(n, offset + batch)):
            example_id = uuid.uuid4()
            label = "hate" if rng.random() < 0.45 else "not hate"
            predicted = label if rng.random() < 0.6 else ("not hate" if label == "hate" else "hate")
            meta = {"label_explanation": "generated"}
            if label == "hate":
                meta["hate_type"] = rng.choice(TYPES)
                meta["target_groups"] = rng.sample(GROUPS, rng.choice((1, 1, 2)))
                facets.append({"example_id": example_id, "field": "hate_type", "value": meta["hate_type"]})
                facets.extend({"example_id": example_id, "field": "target_groups", "value": g}
                              for g in meta["target_groups"])
            text = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(5, 30)))
            validations = rng.choice((0, 0, 1, 2, 3))
            examples.append({
                "id": example_id, "task_id": task.id, "round_id": rng.choice(rounds), "author_id": rng.choice(people),
                "inputs": {"text": text}, "text": text, "true_label": label, "model_fooled": predicted != label,
                "meta": meta, "status": "submitted" if rng.random() > 0.03 else "retracted",
                "time_spent_ms": rng.randint(10_000, 300_000), "submitted_at": start + timedelta(seconds=i * 50),
                "sync_state": "pending", "validation_count": validations,
                "validation_state": ("unvalidated", "in_progress", "in_progress", "decided")[validations],
                "disagreement_count": rng.choice((0, 0, 0, 1)) if validations > 1 else 0,
                "flag_count": 1 if rng.random() < 0.02 else 0,
                "decided_verdict": rng.choice(("correct", "correct", "incorrect")) if validations == 3 else None,
            })
            for position, model in enumerate(models):
                outputs.append({"id": uuid.uuid4(), "example_id": example_id, "model_id": model.id,
                                "position": position, "model_sha256": model.sha256, "label": predicted,
                                "probabilities": {"hate": 0.5, "not hate": 0.5}, "latency_ms": 3.0,
                                "fooled": predicted != label})
        with desk.db.write() as session:
            session.execute(insert(Example), examples)
            session.execute(insert(ModelOutputRow), outputs)
            session.execute(insert(ExampleFacet), facets)
    desk.db.refresh_statistics()  # as an import does


def review_queries(desk: Desk, n: int) -> dict:
    """The questions a team lead asks of the review view, as callables."""
    task_id = desk.tasks.task("hate_speech").id
    round_ids = [r.id for r in desk.tasks.rounds("hate_speech")]
    author = desk.people.by_name("Annotator 07")
    review, stats = desk.review, desk.stats
    broad = ExampleFilter(task_id=task_id)
    narrow = ExampleFilter(task_id=task_id, round_ids=round_ids[1:2], labels=["hate"], fooled=True,
                           validation_states=["in_progress"])
    queries = {
        "count, no filter": lambda: review.count(broad),
        "filter label+fooled+round+state: count + first page": lambda: (review.count(narrow), review.rows(narrow)),
        "filter by target group facet: count + first page": lambda: (
            review.count(f := ExampleFilter(facets={"target_groups": ["refugees"]})), review.rows(f)),
        "filter disagreements>=1 and flags>=1: count + page": lambda: (
            review.count(f := ExampleFilter(min_disagreements=1, min_flags=1)), review.rows(f)),
        "sort by submitted time, first page": lambda: review.rows(broad, sort="submitted_at"),
        "sort by text, first page": lambda: review.rows(broad, sort="text", descending=False),
        "sort by author, first page": lambda: review.rows(broad, sort="author", descending=False),
        "deep page (offset 50,000)": lambda: review.rows(broad, offset=n // 2),
        **{name: (lambda term=term: (review.count(f := ExampleFilter(text=term)), review.rows(f)))
           for name, term in SEARCHES.items()},
        "counts by label": lambda: review.counts_by(broad, "label"),
        "counts by target group": lambda: review.counts_by(broad, "target_groups"),
        "MER/vMER by annotator": lambda: stats.figures("annotator"),
        "MER/vMER by target model": lambda: stats.figures("model"),
        "MER/vMER by round": lambda: stats.figures("round"),
        "validation queue: next example": lambda: desk.validation.next_for(author.id),
    }
    return queries


def health_checks(desk: Desk, n: int, quick: bool) -> list[Result]:
    """The damage check (quick_check) and the daily copy: too slow at 100k for the 3 s start-up
    budget, so both run on a background thread at open; the check runs again before imports and syncs."""
    size_mb = desk.db.path.stat().st_size / 1e6
    checks = summarise("storage", f"quick_check of the database ({n // 1000}k, {size_mb:,.0f} MB)",
                       time_calls(desk.db.quick_check, 3 if quick else 7, warmup=1),
                       notes="background thread at open; before every import and sync")
    copies = []
    for _ in range(1 if quick else 3):
        started = time.perf_counter()
        copy = desk.db.backup("bench-daily")
        copies.append((time.perf_counter() - started) * 1000)
        copy.unlink()
    copy_result = summarise("storage", f"daily copy with SQLite's backup API ({n // 1000}k, {size_mb:,.0f} MB)",
                            copies, notes="background thread, once a day")
    return [checks, copy_result]


def run(ctx: BenchContext) -> list[Result]:
    n = 10_000 if ctx.quick else 100_000
    rng = random.Random(11)
    desk = Desk(ctx.work_dir / "desk")
    started = time.perf_counter()
    fill(desk, n, rng)
    fill_s = time.perf_counter() - started
    results = [Result("storage", f"bulk insert of {n:,} examples (+2 outputs each, facets)", "s", median=fill_s, n=1,
                      notes=f"{n / fill_s:,.0f} examples/s; FTS index maintained by triggers")]
    results.extend(health_checks(desk, n, ctx.quick))
    queries = review_queries(desk, n)
    repeats = 10 if ctx.quick else 30
    for name, query in queries.items():
        result = summarise("storage", f"{name} ({n // 1000}k)", time_calls(query, repeats, warmup=2),
                           budget_p95_ms=BUDGET_MS)
        if name in SEARCHES:
            result.notes = f"{desk.review.count(ExampleFilter(text=SEARCHES[name])):,} hits"
        results.append(result)

    model = desk.models.all()[0]
    person = desk.people.by_name("Annotator 01")
    counter = iter(range(10**9))

    def submit():
        desk.examples.create(person.id, "hate_speech",
                             Content({"text": f"bench example {next(counter)} 😀"}, "hate",
                                     meta={"hate_type": "derogation", "target_groups": ["women"],
                                           "label_explanation": "bench"}),
                             [ModelOutput(model.id, model.sha256, "not hate", {"hate": 0.2, "not hate": 0.8}, 3.0)])

    results.append(summarise("storage", f"submit one example (unit of work, fsync; {n // 1000}k in db)",
                             time_calls(submit, 50 if ctx.quick else 200), notes="synchronous=FULL"))
    desk.close()
    return results
