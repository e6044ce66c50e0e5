"""Careful text surgery for the rules: find a phrase as whole words (any case, either apostrophe,
any run of spaces), replace it keeping the original's casing style, and wrap a text in a framing,
leaving emoji, zero-width characters and everything outside the edited span exactly as written."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

APOSTROPHES = "'\u2019\u02bc"
_WORD_CHAR = r"[^\W_]"  # letters and digits: a phrase must not touch one on either side


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    found: str  # the text as written


@lru_cache(maxsize=4096)
def _pattern(phrase: str) -> re.Pattern[str]:
    parts: list[str] = []
    for char in phrase:
        if char.isspace():
            if not parts or parts[-1] != r"\s+":
                parts.append(r"\s+")
        elif char in APOSTROPHES:
            parts.append(f"[{APOSTROPHES}]")
        else:
            parts.append(re.escape(char))
    return re.compile(rf"(?<!{_WORD_CHAR})(?<![{APOSTROPHES}]){''.join(parts)}(?!{_WORD_CHAR})(?![{APOSTROPHES}]\w)",
                      re.IGNORECASE)


def find(text: str, phrase: str) -> Iterator[Match]:
    """Each whole-word occurrence of ``phrase`` in ``text``."""
    if not phrase:
        return
    for m in _pattern(phrase).finditer(text):
        yield Match(m.start(), m.end(), m.group())


def is_shouting(text: str) -> bool:
    """Written in capitals (at least two letters, none lower-case)."""
    letters = [c for c in text if c.isalpha() and c.lower() != c.upper()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def cased_like(found: str, replacement: str, listed: str = "", at_start: bool = False) -> str:
    """``replacement`` in the casing style of ``found`` (the text as written; ``listed`` is the
    list's form of it): capitals stay capitals; a capital the writer gave (the list writes the word
    lower-case, or it starts the sentence) carries over; otherwise the replacement keeps its own
    casing, so names stay capitalised and "Muslims" does not capitalise the word put in its place."""
    if not replacement:
        return replacement
    if is_shouting(found):
        return replacement.upper()
    first = next((c for c in found if c.isalpha()), "")
    listed_first = next((c for c in listed or found.lower() if c.isalpha()), "")
    if first.isupper() and (at_start or not listed_first.isupper()):
        return replacement[0].upper() + replacement[1:]
    return replacement


def starts_sentence(text: str, start: int) -> bool:
    """Whether position ``start`` begins a sentence (only spaces, quotes or an opening bracket
    since the text's start or since . ! ?)."""
    before = text[:start].rstrip(" \t\n\"'(\u201c\u2018\u200b\u200c\u200d\u2060\ufeff")
    return not before or before[-1] in ".!?\u2026"


def apostrophe_of(text: str) -> str:
    """The apostrophe the writer uses (typographic or straight)."""
    for char in text:
        if char in APOSTROPHES[1:]:
            return char
    return "'"


def with_apostrophe(phrase: str, apostrophe: str) -> str:
    return phrase.replace("'", apostrophe) if apostrophe != "'" else phrase


def replace_span(text: str, start: int, end: int, replacement: str) -> str:
    """``text`` with ``[start, end)`` replaced; an empty replacement also drops one space beside it."""
    if replacement:
        return text[:start] + replacement + text[end:]
    if end < len(text) and text[end] == " ":
        end += 1
    elif start > 0 and text[start - 1] == " ":
        start -= 1
    out = text[:start] + text[end:]
    if start == _first_letter(text) and out:  # the sentence's first word went: the next one starts it
        at = _first_letter(out)
        if at < len(out) and out[at].islower() and not is_shouting(text):
            out = out[:at] + out[at].upper() + out[at + 1:]
    return out


def _first_letter(text: str) -> int:
    return next((i for i, c in enumerate(text) if c.isalpha()), len(text))


_STRONG_RTL = {"R", "AL"}


def is_mostly_rtl(text: str) -> bool:
    """More right-to-left letters (Arabic, Hebrew…) than left-to-right ones: an English framing
    around it would read wrongly, so framing rules leave it alone."""
    rtl = ltr = 0
    for char in text:
        kind = unicodedata.bidirectional(char)
        if kind in _STRONG_RTL:
            rtl += 1
        elif kind == "L":
            ltr += 1
    return rtl > ltr


def quotable(text: str) -> str:
    """The statement as it goes inside a framing: outer spaces and one final full stop dropped,
    double quotes inside it turned single so the framing's quotes stay unambiguous."""
    body = text.strip()
    if body.endswith(".") and not body.endswith(".."):
        body = body[:-1].rstrip()
    return body.replace('"', "'").replace("\u201c", "'").replace("\u201d", "'")


def prefixed(prefix: str, text: str, keep_capital: frozenset[str] = frozenset()) -> str:
    """``prefix`` put before ``text``, the text's first letter lowered when it only started the
    sentence (not for "I", names or words listed in ``keep_capital``); capitals stay capitals."""
    lead = len(text) - len(text.lstrip())
    body = text[lead:]
    if is_shouting(text):
        return text[:lead] + prefix.upper() + " " + body
    first_word = re.match(r"[\w'\u2019]+", body)
    word = first_word.group() if first_word else ""
    lowered = body
    if word and word[0].isupper() and word[1:].islower() and word != "I" and not word.startswith(("I'", "I\u2019")) \
            and word.casefold() not in keep_capital:
        lowered = body[0].lower() + body[1:]
    return text[:lead] + prefix + " " + lowered


def framed(template: str, text: str) -> str:
    """``template`` with ``{text}`` replaced by the quotable statement; capitals stay capitals."""
    body = quotable(text)
    if is_shouting(text):
        before, _, after = template.partition("{text}")
        return before.upper() + body + after.upper()
    return template.replace("{text}", body)
