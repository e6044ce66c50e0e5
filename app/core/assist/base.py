"""What every generator shares: its signature, how it says it cannot work, and its tag."""

from __future__ import annotations

from collections.abc import Callable

from app.core.assist.types import Candidate, GenerationContext, Generator, Unavailable

GeneratorFn = Callable[[GenerationContext], list[Candidate]]


class GeneratorUnavailable(Exception):
    """Raised by a generator that cannot work here (no gradients, no attributions, no rule...):
    the suggestion set shows the reason instead of an unexplained empty list."""

    def __init__(self, reason: Unavailable):
        super().__init__(reason.value)
        self.reason = reason


def makes(kind: Generator) -> Callable[[GeneratorFn], GeneratorFn]:
    """Tag a generator function with the ``Generator`` it is, for the set's "unavailable" reasons."""

    def tag(fn: GeneratorFn) -> GeneratorFn:
        fn.generator = kind  # type: ignore[attr-defined]
        return fn

    return tag


def generator_of(fn: GeneratorFn) -> Generator:
    kind = getattr(fn, "generator", None)
    if kind is None:
        raise TypeError(f"{getattr(fn, '__name__', fn)} is not tagged with @makes(Generator...)")
    return Generator(kind)
