"""What an evaluation runs on: evaluation sets (rounds, a HateCheck suite, a labelled file) and
the derived cases (identity swaps, spelling perturbations). Qt-free, model-free.

    suite = read_hatecheck_suite(path)                  # EvalSet with functionality / target per case
    data = read_labelled_file(path)                     # CSV or JSONL with a text and a label column
    rounds = round_sets(desk, "hate_speech", "all")     # validated examples, one EvalSet per round
    swaps = identity_swaps(suite.cases, seed=0, limit=300)
    noisy = spelling_perturbations(cases, seed=0, limit=300)
"""

from __future__ import annotations

import html
import json
import random
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.core.errors import DynadeskError, ImportProblem
from app.core.io.rows import csv_table, json_lines, read_text

HATECHECK_COLUMNS = ("functionality", "case_id", "test_case", "label_gold")
HATECHECK_GOLD = {"hateful": "hate", "non-hateful": "not hate"}
TEXT_COLUMNS = ("text", "test_case", "tweet", "sentence", "statement", "hypothesis")
LABEL_COLUMNS = ("label", "gold", "gold_label", "label_gold", "true_label", "class")
CONTEXT_COLUMNS = ("premise", "context", "sentence1", "passage")  # a pair's first text (NLI's premise)
MAX_EVAL_FILE_BYTES = 512 * 1024**2

# The target groups of HateCheck with their plural, singular and adjective forms (the template
# placeholders [IDENTITY_P], [IDENTITY_S], [IDENTITY_A]); identity swaps replace one by another.
IDENTITY_TERMS: dict[str, tuple[str, str, str]] = {
    "women": ("women", "woman", "female"),
    "trans people": ("trans people", "trans person", "trans"),
    "gay people": ("gay people", "gay person", "gay"),
    "black people": ("black people", "black person", "black"),
    "disabled people": ("disabled people", "disabled person", "disabled"),
    "Muslims": ("Muslims", "Muslim", "Muslim"),
    "immigrants": ("immigrants", "immigrant", "immigrant"),
}
PERTURBATIONS = ("char_swap", "space_add", "space_remove", "leetspeak")
LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"}


class EvaluationInputError(DynadeskError):
    """An evaluation file that cannot be used, with the reason and where."""


@dataclass
class Case:
    id: str
    text: str  # what a person reads (the written text)
    gold: str
    functionality: str | None = None
    target: str | None = None
    input: list[str] | None = None  # a pair (context, text) when the model reads two segments
    extra: dict = field(default_factory=dict)

    @property
    def model_input(self):
        return tuple(self.input) if self.input else self.text

    def to_json(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if v not in (None, {}, [])}
        data.setdefault("text", self.text)
        data.setdefault("gold", self.gold)
        return data

    @classmethod
    def from_json(cls, data: dict) -> Case:
        fields: dict[str, Any] = {k: data.get(k) for k in ("id", "text", "gold", "functionality", "target", "input")}
        return cls(**fields, extra=data.get("extra") or {})


@dataclass
class EvalSet:
    key: str  # unique within one evaluation: "round-1", "suite", "data"
    name: str
    kind: str  # "round", "suite" or "dataset"
    cases: list[Case]
    source: str = ""
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (original, perturbed or contrast) case ids

    def to_json(self) -> dict:
        return {"key": self.key, "name": self.name, "kind": self.kind, "source": self.source,
                "cases": [c.to_json() for c in self.cases], "pairs": [list(p) for p in self.pairs]}

    @classmethod
    def from_json(cls, data: dict) -> EvalSet:
        return cls(data["key"], data["name"], data["kind"], [Case.from_json(c) for c in data["cases"]],
                   data.get("source", ""), [tuple(p) for p in data.get("pairs", [])])


@dataclass(frozen=True)
class Variant:
    """A derived case: the same gold label, an edited text."""

    id: str
    set: str
    case: str
    kind: str  # "identity_swap" or one of PERTURBATIONS
    text: str
    group: str | None = None  # identity swaps: the group the text now names

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}



def guess_columns(header: Sequence[str]) -> tuple[str | None, str | None]:
    """A labelled file's text and label columns, found by name (TEXT_COLUMNS, LABEL_COLUMNS, first known
    name wins); None where no column has a known name."""
    def find(known: tuple[str, ...]) -> str | None:
        return next((c for c in known if c in header), None)

    return find(TEXT_COLUMNS), find(LABEL_COLUMNS)


def guess_context_column(header: Sequence[str]) -> str | None:
    """A pair file's context column (the premise), found by name (CONTEXT_COLUMNS); None where none has a known name."""
    return next((c for c in CONTEXT_COLUMNS if c in header), None)


def _read_text(path: Path, what: str) -> str:
    try:
        return read_text(Path(path), what, MAX_EVAL_FILE_BYTES)
    except DynadeskError as exc:
        raise EvaluationInputError(str(exc)) from exc


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in (".jsonl", ".ndjson", ".json")


def _jsonl_objects(path: Path, content: str) -> Iterable[tuple[int, dict]]:
    """(line number, object) for each non-blank line; anything but a JSON object is an error naming its line."""
    for number, value in json_lines(content):
        if isinstance(value, ImportProblem):
            raise EvaluationInputError(f"{path}, line {number}: not a JSON object ({value.reason}).")
        if not isinstance(value, dict):
            raise EvaluationInputError(f"{path}, line {number}: not a JSON object.")
        yield number, value


def _csv_rows(path: Path, text: str, what: str) -> tuple[list[str], list[tuple[int, dict]]]:
    header, table = csv_table(text)
    rows = []
    for line, row in table:
        if isinstance(row, ImportProblem):
            raise EvaluationInputError(f"{path}, {row}.")
        rows.append((line, row))
    if not header:
        raise EvaluationInputError(f"{path} is empty: a {what} needs a header row and cases.")
    return header, rows


def read_hatecheck_suite(path: str | Path, *, label_names: dict[str, str] | None = None) -> EvalSet:
    """A functional test suite in HateCheck's CSV format; every bad row is named by its line.

    ``label_names`` maps HateCheck's gold labels onto the task's (default: hateful -> hate).
    Cases that name a reference case (``ref_case_id``) present in the file form contrast pairs.
    """
    path = Path(path)
    names = label_names or HATECHECK_GOLD
    header, rows = _csv_rows(path, _read_text(path, "HateCheck suite file"), "HateCheck suite file")
    missing = [c for c in HATECHECK_COLUMNS if c not in header]
    if missing:
        raise EvaluationInputError(
            f"{path} is not a HateCheck suite: it lacks the column(s) {', '.join(missing)} "
            f"(a HateCheck CSV has {', '.join(HATECHECK_COLUMNS)}, target_ident, ref_case_id, ...)."
        )
    problems, cases, seen = [], [], set()
    for line, row in rows:
        case_id, text = (row["case_id"] or "").strip(), (row["test_case"] or "").strip()
        gold = names.get((row["label_gold"] or "").strip())
        functionality = (row["functionality"] or "").strip()
        if not case_id:
            problems.append(f"line {line}: case_id is empty")
        elif case_id in seen:
            problems.append(f"line {line}: case_id {case_id} appears twice")
        elif not text:
            problems.append(f"line {line}: test_case is empty")
        elif gold is None:
            problems.append(f"line {line}: label_gold '{row['label_gold']}' is not one of {', '.join(names)}")
        elif not functionality:
            problems.append(f"line {line}: functionality is empty")
        else:
            seen.add(case_id)
            extra = {k: row[k] for k in ("ref_case_id", "templ_id", "direction", "focus_words") if row.get(k)}
            cases.append(Case(case_id, text, gold, functionality, (row.get("target_ident") or "").strip() or None,
                              extra=extra))
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise EvaluationInputError(f"{path}: {len(problems)} bad case(s), so the suite was not used: {shown}.")
    if not cases:
        raise EvaluationInputError(f"{path} has a header but no cases.")
    ids = {c.id for c in cases}
    pairs = [(c.extra["ref_case_id"].split(".")[0], c.id) for c in cases
             if c.extra.get("ref_case_id") and c.extra["ref_case_id"].split(".")[0] in ids]
    return EvalSet("suite", f"{path.stem} (HateCheck, {len(cases)} cases)", "suite", cases, str(path), pairs)


def read_labelled_file(path: str | Path, *, text_column: str | None = None, label_column: str | None = None,
                       label_names: dict[str, str] | None = None, key: str = "data") -> EvalSet:
    """A labelled data set (a held-out split): CSV with a header, or JSON lines.

    Columns are found by name (text, test_case, tweet, sentence ...; label, gold, label_gold ...)
    unless given. ``label_names`` maps the file's label values onto the task's labels.
    """
    path = Path(path)
    content = _read_text(path, "data file")
    records: list[tuple[int, dict]] = []
    if _is_jsonl(path):
        for number, value in _jsonl_objects(path, content):
            records.append((number, {k: v if isinstance(v, str) else json.dumps(v) if v is not None else ""
                                     for k, v in value.items()}))
        header = list(dict.fromkeys(k for _, r in records for k in r))
    else:
        header, records = _csv_rows(path, content, "data file")
    guessed_text, guessed_label = guess_columns(header)
    text_col = text_column or guessed_text
    label_col = label_column or guessed_label
    for chosen, option, known in ((text_col, "--text-column", TEXT_COLUMNS), (label_col, "--label-column", LABEL_COLUMNS)):
        if chosen is None or chosen not in header:
            raise EvaluationInputError(
                f"{path}: no {'text' if known is TEXT_COLUMNS else 'label'} column "
                f"{'named ' + chosen if chosen else 'found (looked for ' + ', '.join(known) + ')'}; "
                f"its columns are {', '.join(header) or 'none'}. Name it with {option}."
            )
    id_col = next((c for c in ("id", "case_id", "uid", "example_id") if c in header), None)
    target_col = next((c for c in ("target", "target_ident", "target_group") if c in header), None)
    cases, problems = [], []
    for line, row in records:
        text, raw = (row.get(text_col) or "").strip(), (row.get(label_col) or "").strip()
        if not text or not raw:
            problems.append(f"line {line}: empty {'text' if not text else 'label'}")
            continue
        gold = (label_names or {}).get(raw, raw)
        case_id = (row.get(id_col) or "").strip() if id_col else ""
        cases.append(Case(case_id or f"line-{line}", text, gold,
                          target=(row.get(target_col) or "").strip() or None if target_col else None))
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise EvaluationInputError(f"{path}: {len(problems)} bad row(s), so the file was not used: {shown}.")
    if not cases:
        raise EvaluationInputError(f"{path} holds no labelled rows.")
    if len({c.id for c in cases}) != len(cases):
        for i, case in enumerate(cases):
            case.id = f"{case.id}#{i}"
    return EvalSet(key, f"{path.name} ({len(cases)} examples)", "dataset", cases, str(path))


def round_sets(desk, task_code: str, rounds: Literal["all"] | Sequence[int] = "all", *,
               include_unvalidated: bool = False) -> list[EvalSet]:
    """One set per round: the examples validated as correct or corrected (gold: the decided label).

    With ``include_unvalidated`` submitted examples without a decision count too, with their
    author's label. Perturbation pairs within a round are kept as pairs.
    """
    from sqlalchemy import select

    from app.core.domain import ExampleStatus, ValidationState
    from app.core.services.target_models import model_input
    from app.core.storage.models import Example
    from app.core.tasks.variants import is_variant

    definition = desk.tasks.definition_by_code(task_code)
    if definition.is_extractive:
        raise EvaluationInputError(f"{definition.name} is an extractive QA task; evaluation scores classifiers.")
    all_rounds = desk.tasks.rounds(task_code)
    wanted = [r for r in all_rounds if rounds == "all" or r.number in set(rounds)]
    if rounds != "all":
        unknown = sorted(set(rounds) - {r.number for r in all_rounds})
        if unknown:
            have = ", ".join(str(r.number) for r in all_rounds) or "none"
            raise EvaluationInputError(f"{task_code} has no round {', '.join(map(str, unknown))} (it has {have}).")
    sets = []
    # the columns a case needs, not whole examples: ORM objects cost ~5x more at 100k examples
    columns = (Example.id, Example.text, Example.validation_state, Example.decided_label, Example.true_label,
               Example.meta, Example.inputs, Example.perturbation_of, Example.origin)
    with desk.db.read() as session:
        for round_ in wanted:
            query = select(*columns).where(
                Example.round_id == round_.id,
                Example.status.in_([ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value]))
            if not include_unvalidated:
                query = query.where(Example.validation_state == ValidationState.DECIDED.value)
            cases, ids = [], {}
            examples = list(session.execute(query.order_by(Example.submitted_at, Example.id)))
            origins = _origins(session, examples)
            for example in examples:
                if is_variant(example.origin):
                    continue  # a generated variant is the adaptive suite's case, scored as a split of its own
                decided = example.validation_state == ValidationState.DECIDED.value and example.decided_label
                gold = example.decided_label if decided else (example.true_label if include_unvalidated else None)
                if not gold:
                    continue
                groups = (example.meta or {}).get("target_groups") or []
                item = model_input(definition, example.inputs or {})
                cases.append(Case(str(example.id), example.text, gold, target=groups[0] if len(groups) == 1 else None,
                                  input=list(item) if isinstance(item, tuple) else None,
                                  extra=_round_case_extra(example, origins)))
                ids[str(example.id)] = True
            pairs = [(c.extra["perturbation_of"], c.id) for c in cases if c.extra.get("perturbation_of") in ids]
            what = "validated" if not include_unvalidated else "submitted"
            sets.append(EvalSet(f"round-{round_.number}", f"Round {round_.number}", "round", cases,
                                f"{len(cases)} {what} examples", pairs))
    return sets



def stored_suite_sets(desk: Any, task_code: str) -> list[EvalSet]:
    """Every functional test suite imported into the desk for the task (``dynadesk import`` of a HateCheck
    file without a round), one set each, keyed ``suite-<name>``; the gold labels are already the task's."""
    from sqlalchemy import select

    from app.core.storage.models import Suite, SuiteCase

    task = desk.tasks.task(task_code)
    sets: list[EvalSet] = []
    with desk.db.read() as session:
        for suite in session.scalars(select(Suite).where(Suite.task_id == task.id).order_by(Suite.created_at, Suite.id)):
            cases = [Case(c.case_id, c.text, c.gold_label, c.functionality, c.target, extra=dict(c.extra or {}))
                     for c in session.scalars(select(SuiteCase).where(SuiteCase.suite_id == suite.id)
                                              .order_by(SuiteCase.position))]
            ids = {c.id for c in cases}
            pairs = [(c.extra["ref_case_id"].split(".")[0], c.id) for c in cases
                     if c.extra.get("ref_case_id") and c.extra["ref_case_id"].split(".")[0] in ids]
            key = f"suite-{suite.name}"
            while any(s.key == key for s in sets):
                key += "+"
            sets.append(EvalSet(key, f"{suite.name} (suite, {len(cases):,} cases)", "suite", cases,
                                f"{suite.source}; sha256 {suite.sha256}", pairs))
    return sets


def _origins(session: Any, examples: Sequence[Any]) -> dict[Any, Any]:
    """Each example's origin, and its pair original's (read apart when the original itself is not a case)."""
    from sqlalchemy import select

    from app.core.storage.models import Example

    origins = {e.id: e.origin for e in examples}
    missing = {e.perturbation_of for e in examples if e.perturbation_of is not None} - set(origins)
    if missing:
        origins.update(session.execute(select(Example.id, Example.origin).where(Example.id.in_(missing))).all())
    return origins


def resample_units(cases: Sequence[Case]) -> list[str]:
    """What a bootstrap draws whole: what the held-out split keeps together (a group such as a template, or a
    perturbation pair), whose members are not independent items."""
    return [c.extra.get("group") or c.extra.get("seed") or c.extra.get("perturbation_of") or c.id for c in cases]


def _round_case_extra(example: Any, origins: Mapping[Any, Any]) -> dict[str, str]:
    """What a round case carries for the held-out split (``splits.is_held_out``): its pair's original and its
    split group (its own, else its original's)."""
    from app.core.tasks.splits import split_group
    from app.core.tasks.variants import split_root

    extra = {"perturbation_of": str(example.perturbation_of)} if example.perturbation_of else {}
    root = split_root(example.origin)
    if root is not None:  # a variant goes with its seed: resampled and split as one unit
        extra["seed"] = str(root)
    group = split_group(example.origin, origins.get(example.perturbation_of) if example.perturbation_of else None)
    return {**extra, "group": group} if group else extra


def _case_rng(seed: int, *parts: str) -> random.Random:
    return random.Random("\x1f".join([str(seed), *parts]))


def _sample(cases: Sequence[Case], limit: int | None, seed: int, what: str) -> list[Case]:
    if limit is None or len(cases) <= limit:
        return list(cases)
    picked = sorted(random.Random(f"{seed}:{what}").sample(range(len(cases)), limit))
    return [cases[i] for i in picked]


def _group_form(text: str, group: str) -> tuple[int, re.Match] | None:
    """The first form of ``group`` (plural, singular, adjective: the longest that occurs) in ``text``."""
    for form_index, form in enumerate(IDENTITY_TERMS[group]):
        match = re.search(rf"(?<![\w]){re.escape(form)}(?![\w])", text, flags=re.IGNORECASE)
        if match:
            return form_index, match
    return None


def _same_case(replacement: str, original: str) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def identity_swaps(set_key: str, cases: Sequence[Case], *, seed: int = 0, limit: int | None = 300,
                   groups: Iterable[str] | None = None) -> list[Variant]:
    """For cases that name their target group, the same sentence naming each other group instead."""
    known = {g.casefold(): g for g in IDENTITY_TERMS}
    eligible = []
    for case in cases:
        if case.input:  # a pair (NLI): the swap would have to name which segment; not done
            continue
        group = known.get((case.target or "").casefold())
        if group and _group_form(case.text, group):
            eligible.append((case, group))
    present = sorted({g for _, g in eligible})
    others = list(groups) if groups is not None else (present if len(present) > 1 else list(IDENTITY_TERMS))
    picked = _sample([c for c, _ in eligible], limit, seed, "identity_swap")
    by_id = {c.id: g for c, g in eligible}
    variants = []
    for case in picked:
        group = by_id[case.id]
        found = _group_form(case.text, group)
        assert found is not None  # eligible cases name their group
        form_index, match = found
        for other in others:
            if other == group:
                continue
            replacement = _same_case(IDENTITY_TERMS[other][form_index], match.group(0))
            text = case.text[:match.start()] + replacement + case.text[match.end():]
            variants.append(Variant(f"swap:{set_key}:{case.id}:{other}", set_key, case.id, "identity_swap", text, other))
    return variants


def perturb(text: str, kind: str, rng: random.Random) -> str | None:
    """One spelling perturbation of ``text``, or None when the text offers no place for it."""
    words = [(m.start(), m.end()) for m in re.finditer(r"[^\W\d_]+", text)]
    if kind == "char_swap":
        spots = [(s, e) for s, e in words if e - s >= 4]
        if not spots:
            return None
        s, e = rng.choice(spots)
        i = rng.randrange(s + 1, e - 2)
        if text[i] == text[i + 1]:
            candidates = [j for j in range(s + 1, e - 2) if text[j] != text[j + 1]]
            if not candidates:
                return None
            i = rng.choice(candidates)
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    if kind == "space_add":
        spots = [(s, e) for s, e in words if e - s >= 3]
        if not spots:
            return None
        s, e = rng.choice(spots)
        i = rng.randrange(s + 1, e)
        return text[:i] + " " + text[i:]
    if kind == "space_remove":
        gaps = [m.start() for m in re.finditer(r"(?<=\w) (?=\w)", text)]
        if not gaps:
            return None
        i = rng.choice(gaps)
        return text[:i] + text[i + 1:]
    if kind == "leetspeak":
        spots = [(s, e) for s, e in words if any(ch.lower() in LEET for ch in text[s:e])]
        if not spots:
            return None
        chars = list(text)
        for s, e in rng.sample(spots, min(2, len(spots))):
            positions = [i for i in range(s, e) if chars[i].lower() in LEET]
            i = rng.choice(positions)
            chars[i] = LEET[chars[i].lower()]
        return "".join(chars)
    raise ValueError(f"unknown perturbation {kind!r}; known: {', '.join(PERTURBATIONS)}")


def spelling_perturbations(set_key: str, cases: Sequence[Case], *, seed: int = 0, limit: int | None = 300,
                           kinds: Sequence[str] = PERTURBATIONS) -> list[Variant]:
    """Each sampled case under each perturbation kind (seeded per case, so runs repeat exactly)."""
    variants = []
    for case in _sample([c for c in cases if not c.input], limit, seed, "robustness"):
        for kind in kinds:
            text = perturb(case.text, kind, _case_rng(seed, kind, set_key, case.id))
            if text is not None and text != case.text:
                variants.append(Variant(f"{kind}:{set_key}:{case.id}", set_key, case.id, kind, text))
    return variants



def normalised_text(text: str) -> str:
    """What two texts must share to count as the same: words, without case, HTML
    entities, punctuation or spacing differences."""
    text = unicodedata.normalize("NFKC", html.unescape(text)).casefold()
    return " ".join(re.findall(r"\w+", text))


def text_key(text: str) -> str:
    import hashlib

    return hashlib.sha256(normalised_text(text).encode("utf-8")).hexdigest()[:32]


def read_training_texts(path: str | Path, text_column: str | None = None) -> list[str]:
    """The texts of a training file (CSV or JSONL), for the overlap check."""
    path = Path(path)
    content = _read_text(path, "training data file")
    if _is_jsonl(path):
        texts = []
        for _number, value in _jsonl_objects(path, content):
            column = text_column or next((c for c in TEXT_COLUMNS if c in value), None)
            if column and isinstance(value.get(column), str):
                texts.append(value[column])
        return texts
    header, rows = _csv_rows(path, content, "training data file")
    column = text_column or next((c for c in TEXT_COLUMNS if c in header), None)
    if column is None or column not in header:
        raise EvaluationInputError(f"{path}: no text column found ({', '.join(header)}); name it with --training-text-column.")
    return [row.get(column) or "" for _, row in rows]
