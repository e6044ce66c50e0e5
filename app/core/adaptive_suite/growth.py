"""Label-keeping variants of one seed, made with the writing assistant's generators, and the fold that keeps
the distinct ones. No model, no storage: ``service.grow`` checks the drafts against the target and stores them.

The drafts, in the order they are offered:
1. identity swaps across the task's whole group list (the assistant's own rule offers three per mention):
   each protected group the seed names becomes every other protected group of the same number;
2. the assistant's rules for the "fool" goal: those that claim the seed's label stays (hedges, slur ->
   description, implicit phrasings, ...; negation only where the rule guarantees the label);
3. respellings of the words the target leans on (the assistant's obfuscation: leetspeak, homoglyphs,
   swapped or dropped letters, spaces), when the target can explain itself;
4. each identity swap composed with each other edit that touches another part of the text.
Each kind is interleaved by edit type, so a cap keeps every type represented.

Folding (the quality guard's one definition of near, ``app.core.quality.similarity``): variants are edits of
one seed, so as whole texts every one is near the seed and most are near each other; what makes two the same
test is that they name the same group with the same kind of edit. So a draft is folded when it reads the same
as the seed or as a kept variant (equal normalised forms; a respelling is made to read as the seed, so only its
equals among the variants fold it), or when it is near (Jaccard of n-grams at the task's threshold) a kept
variant that names the same group by the same edit type.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from app.core.assist import obfuscation, rules
from app.core.assist.base import GeneratorUnavailable
from app.core.assist.lexicon import Lexicon
from app.core.assist.rule_text import apostrophe_of, cased_like, find, replace_span, starts_sentence, with_apostrophe
from app.core.assist.types import GenerationContext, Goal
from app.core.quality.similarity import Fingerprint, is_near
from app.core.text import WordScore

log = logging.getLogger(__name__)

IDENTITY_SWAP = "identity_swap"  # the rule (generator) name of a swap across the group list
SWAP_TYPE = "group_swap_protected"  # the assistant's edit type for it
RESPELLINGS = frozenset(obfuscation.EDIT_TYPES)
MAX_DRAFTS = 600  # per seed, before the check: ~0.3 s of the default int8 target
MAX_SEED_CHARS = 2000  # the assistant's bound on a text it edits (assist.pipeline.MAX_WRITTEN_CHARS)


@dataclass(frozen=True)
class Draft:
    """A candidate variant: its text, the rule (generator) and edit type that made it, the group it names
    (None: the seed's own), and what changed, in words."""

    text: str
    rule: str
    edit_type: str
    group: str | None = None
    note: str = ""


class NoDrafts(Exception):
    """The seed gives no variant; the message says why (shown in the grow report)."""


# --- drafting -----------------------------------------------------------------------------------

def identity_swaps(text: str, lexicon: Lexicon) -> list[Draft]:
    """Each protected group the text names, as every other group of the list (same number, casing kept)."""
    pairs = [(p, s) for p, s in lexicon.pairs("protected_groups") if p]
    forms: dict[str, tuple[int, bool]] = {}  # a listed form -> (its pair, plural?)
    for index, (plural, singular) in enumerate(pairs):
        forms.setdefault(plural.casefold(), (index, True))
        if singular:
            forms.setdefault(singular.casefold(), (index, False))
    taken: list[tuple[int, int, str, str]] = []
    for form in sorted(forms, key=lambda f: (-len(f), f)):  # longest first: "trans women" before "women"
        for m in find(text, form):
            if all(m.end <= s or m.start >= e for s, e, _, _ in taken):
                taken.append((m.start, m.end, m.found, form))
    out: list[Draft] = []
    apostrophe = apostrophe_of(text)
    for start, end, found, form in sorted(taken):
        own, plural = forms[form]
        for index, (other_plural, other_singular) in enumerate(pairs):
            replacement = other_plural if plural or not other_singular else other_singular
            if index == own or replacement.casefold() == found.casefold():
                continue
            cased = cased_like(found, with_apostrophe(replacement, apostrophe), form,
                               at_start=starts_sentence(text, start))
            out.append(Draft(replace_span(text, start, end, cased), IDENTITY_SWAP, SWAP_TYPE, other_plural,
                             f"'{found}' → '{cased}'"))
    return out


def rule_drafts(ctx: GenerationContext) -> list[Draft]:
    """The assistant's rules that claim the seed's label stays."""
    try:
        found = rules.generate_rules(ctx, limit=10_000)
    except Exception:  # a rule that breaks on an odd text must not stop the growth
        log.exception("the assistant's rules failed on a seed")
        return []
    return [Draft(c.text, str(c.generator), c.edit_type, None, c.note) for c in found
            if c.claimed_label == ctx.writer_label]


def respellings(ctx: GenerationContext) -> list[Draft]:
    """The assistant's respellings of the words the target leans on (none without attributions)."""
    try:
        found = obfuscation.generate(ctx)
    except GeneratorUnavailable:
        return []
    except Exception:
        log.exception("the assistant's respellings failed on a seed")
        return []
    return [Draft(c.text, str(c.generator), c.edit_type, None, c.note) for c in found]


def _span(seed: str, text: str) -> tuple[int, int, str]:
    """The one stretch of ``seed`` that ``text`` changes: (start, end) in the seed and what replaces it."""
    prefix = 0
    limit = min(len(seed), len(text))
    while prefix < limit and seed[prefix] == text[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and seed[len(seed) - 1 - suffix] == text[len(text) - 1 - suffix]:
        suffix += 1
    return prefix, len(seed) - suffix, text[prefix:len(text) - suffix]


def composed(seed: str, swap: Draft, other: Draft) -> Draft | None:
    """``swap`` and ``other`` applied together, when they change separate stretches of the seed."""
    s1, e1, new1 = _span(seed, swap.text)
    s2, e2, new2 = _span(seed, other.text)
    if e1 < s2:  # at least one character of the seed between them: neither edit touches the other's
        text = seed[:s1] + new1 + seed[e1:s2] + new2 + seed[e2:]
    elif e2 < s1:
        text = seed[:s2] + new2 + seed[e2:s1] + new1 + seed[e1:]
    else:
        return None
    return Draft(text, f"{swap.rule}+{other.rule}", f"{swap.edit_type}+{other.edit_type}", swap.group,
                 f"{swap.note}; {other.note}")


def interleaved(drafts: Iterable[Draft]) -> Iterator[Draft]:
    """Round-robin over edit types."""
    by_type: dict[str, list[Draft]] = {}
    for d in drafts:
        by_type.setdefault(d.edit_type, []).append(d)
    queues = list(by_type.values())
    for rank in range(max((len(q) for q in queues), default=0)):
        for queue in queues:
            if rank < len(queue):
                yield queue[rank]


def drafts_for(seed: str, label: str, labels: Sequence[str], task_code: str, lexicon: Lexicon,
               attributions: Sequence[WordScore] = (), *, limit: int = MAX_DRAFTS) -> list[Draft]:
    """Every distinct label-keeping draft of ``seed`` (its written text, labelled ``label``), at most ``limit``;
    ``NoDrafts`` saying why when there is none."""
    if len(seed) > MAX_SEED_CHARS:
        raise NoDrafts(f"the seed has {len(seed):,} characters; variants are made of texts of up to "
                       f"{MAX_SEED_CHARS:,}, as the writing assistant's are")
    if not any(unicodedata.category(ch)[0] in "LNS" for ch in seed):  # letters, digits or symbols (emoji)
        raise NoDrafts("the seed has no words to edit")
    ctx = GenerationContext(text=seed, goal=Goal.FOOL, writer_label=label, model_label=None, labels=tuple(labels),
                            task_code=task_code, words=tuple(attributions), lexicon=lexicon, text_label=label)
    swaps = identity_swaps(seed, lexicon) if lexicon.family == "hate_speech" else []
    singles = [d for d in rule_drafts(ctx) if d.edit_type != SWAP_TYPE] + respellings(ctx)
    out: list[Draft] = []
    seen = {seed}
    for draft in [*interleaved(swaps + singles),
                  *interleaved(c for s in swaps for o in singles if (c := composed(seed, s, o)) is not None)]:
        if draft.text not in seen and draft.text.strip():
            seen.add(draft.text)
            out.append(draft)
            if len(out) >= limit:
                break
    if not out:
        if lexicon.family is None and not attributions:
            raise NoDrafts(f"no generator works for task '{task_code}' here: it has no assistant rules, and the "
                           "target gave no word attributions to respell")
        raise NoDrafts("no label-keeping edit applies to this text (no group of the list, hedge, respelling or "
                       "other rule that keeps its label)")
    return out


# --- folding ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kept:
    """A text a draft is compared with: the seed, an earlier variant or a variant kept in this growth."""

    fingerprint: Fingerprint
    group: str
    edit_type: str | None  # None: the seed


def kept(text: str, group: str, edit_type: str | None) -> Kept:
    return Kept(Fingerprint.of(text), group, edit_type)


def folds(draft_text: str, group: str, edit_type: str, against: Sequence[Kept], threshold: float) -> bool:
    """Whether a draft is a near-duplicate of what is kept (see the module's doc)."""
    mine = Fingerprint.of(draft_text)
    for other in against:
        if other.edit_type is None:  # the seed: only what reads the same, and a respelling is meant to
            if mine.normalised == other.fingerprint.normalised and edit_type.split("+")[-1] not in RESPELLINGS:
                return True
            continue
        if mine.normalised == other.fingerprint.normalised:
            return True
        if other.group == group and other.edit_type == edit_type and is_near(mine.similarity(other.fingerprint),
                                                                             threshold):
            return True
    return False
