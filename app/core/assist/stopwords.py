"""Function words: the words that carry a sentence's grammar, not what it says about anyone. The
assistant never swaps them, and the blur never masks them on the model's word alone."""

from __future__ import annotations

from typing import Final

STOPWORDS: Final[frozenset[str]] = frozenset("""
a an the and or but if then so than that this these those there here of to in on at by for with from into
onto over under about as is am are was were be been being do does did have has had having it its itself
i me my mine we us our ours you your yours he him his she her hers they them their theirs what which who
whom whose when where why how all any both each few more most other some such no nor not only own same
too very can will just should would could may might must shall s t don ll re ve d m o y
""".split())
