"""The generators the assistant runs, in order: each ``(GenerationContext) -> list[Candidate]``,
tagged with ``@makes(Generator.X)`` (app/core/assist/base.py), best candidates first. A generator
that cannot work raises ``GeneratorUnavailable(reason)``. Add one by adding it here."""

from __future__ import annotations

from app.core.assist import obfuscation, rules, substitution
from app.core.assist.base import GeneratorFn

GENERATORS: tuple[GeneratorFn, ...] = (
    obfuscation.generate,
    substitution.generate,
    rules.generate,
)
