"""The evidence that the writing assistant helps: the assistant on HateCheck's dev suite.

    python -m bench.evidence_assist [--work DIR] [--sample N] [--out docs/assist-experiment.md]

The target is the bundled default model in the desk's form (ONNX int8 when it passes parity), word
substitution takes its gradients from the PyTorch form, exactly as `dynadesk suggest` does; every
suggestion is checked by the pipeline (``app.core.assist.pipeline.suggest``) before it counts.

1. Fool: for each hateful case the model gets right, the top 5 suggestions (goal "fool", label
   "hate"). A suggestion *fools while keeping a hateful meaning* when it fools the model and is an
   obfuscation (same words, other spelling) or a label-keeping rule (a protected group for another,
   hedging, implicit phrasing, slur <-> description): both keep the meaning by construction. Word
   substitutions (HotFlip) that fool are counted apart: they need a person's judgement.
2. Contrast: HateCheck's paired functionalities. negate_neg_nh, counter_quote_nh and counter_ref_nh
   cases name the hateful case they negate or quote (ref_case_id): from that hateful original,
   does a negation (or counter-speech) suggestion make the model give the paired case's label
   ("non-hateful")? And back: from a negate_neg_nh case, does removing the negation give "hateful"?
   The model's answer on HateCheck's own paired case is shown beside it.

Reads /work/shared/data; writes the markdown table to --out and prints it. Figures are reported,
never asserted.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
HATECHECK = Path("/work/shared/data/hatecheck/test_suite_cases_dev.csv")
TOP = 5
HATE, NOT_HATE = "hate", "not hate"
GOLD = {"hateful": HATE, "non-hateful": NOT_HATE}
KEEPING_RULES = {"group_swap_protected", "hedging", "implicit_phrasing", "slur_to_description", "description_to_slur"}
NEGATION = {"negation_added", "negation_removed"}
COUNTER = {"counter_speech", "quotation"}
PAIRED = {"negate_neg_nh": "negation", "counter_quote_nh": "counter-speech", "counter_ref_nh": "counter-speech"}


def kind_of(suggestion) -> str:
    """obfuscation / rule (label-keeping) / substitution / other rule."""
    c = suggestion.candidate
    if c.generator.value == "obfuscation":
        return "obfuscation"
    if c.generator.value == "substitution":
        return "substitution"
    return "rule" if c.edit_type in KEEPING_RULES else "other rule"


@dataclass
class FoolFigures:
    cases: int = 0
    correct: int = 0
    with_keeping: int = 0  # top 5 has a fooling obfuscation or label-keeping rule
    with_kind: Counter = field(default_factory=Counter)  # kind -> cases whose top 5 has a fooling one of it
    with_any: int = 0
    keeping_anywhere: int = 0  # any checked suggestion (not only the top 5) fools and keeps the meaning
    type_cases: Counter = field(default_factory=Counter)  # edit type -> cases with a fooling one in the top 5
    type_shown: Counter = field(default_factory=Counter)  # edit type -> suggestions of it in the top 5
    type_fooling: Counter = field(default_factory=Counter)  # edit type -> fooling suggestions of it in the top 5
    type_kind: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)  # edit type -> (original, suggestion, p(hate))
    per_functionality: dict = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    seconds: float = 0.0


@dataclass
class ContrastRow:
    functionality: str
    direction: str
    family: str
    pairs: int = 0
    offered: int = 0  # a suggestion of the family was among the checked ones
    produced: int = 0  # one of them got the paired label from the model
    model_on_paired_case: int = 0  # the model gives HateCheck's own paired case its label
    example: tuple[str, str, str] | None = None


def load_cases() -> list[dict]:
    with open(HATECHECK, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def fool_experiment(cases, models, definition, gradients, lexicon, sample: int | None, seed: int) -> FoolFigures:
    from app.core.assist.pipeline import suggest

    figures = FoolFigures()
    hateful = [c for c in cases if c["label_gold"] == "hateful"]
    if sample:
        hateful = random.Random(seed).sample(hateful, min(sample, len(hateful)))
    figures.cases = len(hateful)
    texts = [c["test_case"].strip() for c in hateful]
    predictions = models.predict(texts)
    started = time.perf_counter()
    for case, text, prediction in zip(hateful, texts, predictions):
        if prediction.label != HATE:
            continue
        figures.correct += 1
        checked = suggest(models, definition, text, goal="fool", writer_label=HATE, lexicon=lexicon,
                          gradients=gradients).suggestions
        top = checked[:TOP]
        figures.keeping_anywhere += any(s.fools and kind_of(s) in ("obfuscation", "rule") for s in checked)
        fooling = [s for s in top if s.fools]
        kinds = {kind_of(s) for s in fooling}
        keeps = bool(kinds & {"obfuscation", "rule"})
        figures.with_keeping += keeps
        figures.with_any += bool(fooling)
        for kind in kinds:
            figures.with_kind[kind] += 1
        counts = figures.per_functionality[case["functionality"]]
        counts[0] += 1
        counts[1] += keeps
        for s in top:
            edit = s.candidate.edit_type
            figures.type_shown[edit] += 1
            figures.type_kind[edit] = kind_of(s)
            if s.fools:
                figures.type_fooling[edit] += 1
                if edit not in figures.examples:
                    figures.examples[edit] = (text, s.candidate.text, s.probabilities.get(HATE, 0.0))
        for edit in {s.candidate.edit_type for s in fooling}:
            figures.type_cases[edit] += 1
    figures.seconds = time.perf_counter() - started
    return figures


def contrast_experiment(cases, models, definition, lexicon) -> list[ContrastRow]:
    from app.core.assist import rules
    from app.core.assist.pipeline import suggest

    by_id = {c["case_id"]: c for c in cases}
    rows: dict[tuple[str, str], ContrastRow] = {}
    work = []
    for case in cases:
        family = PAIRED.get(case["functionality"])
        ref = by_id.get(case["ref_case_id"] or "")
        if family is None or ref is None or ref["label_gold"] != "hateful":
            continue
        # hateful original → its paired non-hateful case
        work.append((case, ref["test_case"].strip(), HATE, NOT_HATE, family, "hateful → non-hateful"))
        if case["functionality"] == "negate_neg_nh":  # and back: the negation removed
            work.append((case, case["test_case"].strip(), NOT_HATE, HATE, family, "non-hateful → hateful"))
    paired_predictions = {c["case_id"]: p.label for c, p in
                          zip(cases, models.predict([c["test_case"].strip() for c in cases]))}
    for case, original, present, wanted, family, direction in work:
        row = rows.setdefault((case["functionality"], direction),
                              ContrastRow(case["functionality"], direction, family))
        row.pairs += 1
        paired_text_label = GOLD[case["label_gold"]] if direction.startswith("hateful") else HATE
        paired_case = case if direction.startswith("hateful") else by_id[case["ref_case_id"]]
        row.model_on_paired_case += paired_predictions[paired_case["case_id"]] == paired_text_label
        result = suggest(models, definition, original, goal="contrast", writer_label=wanted, lexicon=lexicon,
                         generators=(rules.generate,), text_label=present)
        types = NEGATION if family == "negation" else COUNTER
        offered = [s for s in result.suggestions if s.candidate.edit_type in types]
        row.offered += bool(offered)
        produced = [s for s in offered if s.predicted == wanted]
        row.produced += bool(produced)
        if produced and row.example is None:
            row.example = (original, produced[0].candidate.text, paired_case["test_case"].strip())
    return list(rows.values())


def share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def markdown(fool: FoolFigures, contrast: list[ContrastRow], *, command: str, model: str, load: str) -> str:
    lines = [
        "# Writing assistant: the HateCheck experiment",
        "",
        f"Generated by `{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); target: {model}; "
        f"load average before the run: {load}. Every suggestion counted here was checked against the target "
        "by the assistant's pipeline before it counted.",
        "",
        "## Fooling the model while keeping a hateful meaning",
        "",
        f"HateCheck dev, hateful cases: {fool.cases:,}; the model gets {fool.correct:,} right "
        f"({share(fool.correct, fool.cases)}). For each of those, the top {TOP} suggestions (goal *fool*, label "
        "*hate*) in the order the writer sees them: fooling first; in each group the best of every edit type, "
        "then the rest, by how far the model's probability moved (`app.core.assist.ranking`):",
        "",
        "| top 5 holds a suggestion that fools the model and is … | cases | share |",
        "|---|---:|---:|",
        f"| **an obfuscation or a label-keeping rule (keeps the hateful meaning by construction)** | "
        f"{fool.with_keeping:,} | **{share(fool.with_keeping, fool.correct)}** |",
        f"| an obfuscation | {fool.with_kind['obfuscation']:,} | {share(fool.with_kind['obfuscation'], fool.correct)} |",
        f"| a label-keeping rule (group swap, hedging, implicit phrasing, slur ↔ description) | "
        f"{fool.with_kind['rule']:,} | {share(fool.with_kind['rule'], fool.correct)} |",
        f"| a word substitution (*needs a person's judgement*) | {fool.with_kind['substitution']:,} | "
        f"{share(fool.with_kind['substitution'], fool.correct)} |",
        f"| anything | {fool.with_any:,} | {share(fool.with_any, fool.correct)} |",
        f"| *for comparison: any checked suggestion (up to 64, not only the top 5) fools and keeps the meaning* | "
        f"{fool.keeping_anywhere:,} | {share(fool.keeping_anywhere, fool.correct)} |",
        "",
        "Per edit type (top-5 suggestions of the cases above): how many cases got a fooling one of that type, and "
        "how often a shown suggestion of that type fooled.",
        "",
        "| edit type | kind | cases with a fooling one | share of cases | shown | fooling when shown | example (original → suggestion, p(hate)) |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for edit in sorted(fool.type_shown, key=lambda e: (-fool.type_cases[e], e)):
        example = fool.examples.get(edit)
        shown = f"{_cell(example[0])} → {_cell(example[1])} ({example[2]:.2f})" if example else ""
        lines.append(f"| {edit} | {fool.type_kind[edit]} | {fool.type_cases[edit]:,} | "
                     f"{share(fool.type_cases[edit], fool.correct)} | {fool.type_shown[edit]:,} | "
                     f"{share(fool.type_fooling[edit], fool.type_shown[edit])} | {shown} |")
    lines += ["", "Per HateCheck functionality (cases the model gets right; share with a meaning-keeping fooling "
              "suggestion in the top 5):", "", "| functionality | cases | share |", "|---|---:|---:|"]
    for name, (n, keeps) in sorted(fool.per_functionality.items()):
        lines.append(f"| {name} | {n} | {share(keeps, n)} |")
    lines += [
        "",
        "## Contrast pairs from HateCheck's paired functionalities",
        "",
        "From the original (the case HateCheck's pair points to), goal *contrast* toward the paired case's label: "
        "*offered* is the share of originals for which a suggestion of the family was made and checked, *produces* "
        "the share for which one of them gets the paired label from the model. The last column is the model on "
        "HateCheck's own paired case, for comparison.",
        "",
        "| functionality | direction | suggestion | pairs | offered | produces the paired label | model right on HateCheck's paired case | example (original → suggestion; HateCheck's pair) |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for row in sorted(contrast, key=lambda r: (r.functionality, r.direction)):
        example = f"{_cell(row.example[0])} → {_cell(row.example[1])}; {_cell(row.example[2])}" if row.example else ""
        lines.append(f"| {row.functionality} | {row.direction} | {row.family} | {row.pairs} | "
                     f"{share(row.offered, row.pairs)} | {share(row.produced, row.pairs)} | "
                     f"{share(row.model_on_paired_case, row.pairs)} | {example} |")
    lines += ["", f"Fool part: {fool.seconds:.0f} s for {fool.correct:,} cases "
              f"({1000 * fool.seconds / max(fool.correct, 1):.0f} ms each: attributions, generation and the check).", ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return "“" + text.replace("|", "\\|").replace("\n", " ") + "”"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/dynadesk-evidence-assist"),
                        help="Where the default model is prepared (kept, so a second run starts at once).")
    parser.add_argument("--sample", type=int, default=0, help="Hateful cases to sample for the fool part (0: all).")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assist-experiment.md")
    options = parser.parse_args(argv)

    from app.core.assist.lexicon import load_lexicon
    from bench.bench_assist import load_assist_models

    if not HATECHECK.is_file():
        print(f"HateCheck's dev suite is not at {HATECHECK}.", file=sys.stderr)
        return 1
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    loaded = load_assist_models(options.work / "cache")
    definition, gradients, models = loaded.definition, loaded.gradients, loaded.models
    model = f"the default model, {loaded.form} (gradients: its PyTorch form)"
    lexicon = load_lexicon("hate_speech", labels=definition.labels)
    cases = load_cases()
    try:
        fool = fool_experiment(cases, models, definition, gradients, lexicon, options.sample or None, options.seed)
        contrast = contrast_experiment(cases, models, definition, lexicon)
    finally:
        models.close()
        gradients.close()
    command = "python -m bench.evidence_assist" + (f" --sample {options.sample}" if options.sample else "")
    text = markdown(fool, contrast, command=command, model=model, load=load)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"Written to {options.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
