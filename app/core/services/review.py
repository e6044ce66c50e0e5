"""Queries for review: filter, sort, page and count examples, with full-text search (FTS5)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnClause, ColumnElement, Select, and_, func, literal_column, or_, select, text
from sqlalchemy.orm import aliased

from app.core.domain import ExampleStatus
from app.core.errors import DynadeskError
from app.core.storage.db import Database
from app.core.storage.models import Example, ExampleFacet, Person, Round, Task
from app.core.tasks.variants import sql_not_variant, sql_variant

NOT_DRAFT = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value, ExampleStatus.RETRACTED.value)
# FTS5 trigram needs at least three characters; shorter terms fall back to a substring scan.
MIN_FTS_TERM = 3
_TERMS = re.compile(r'"([^"]*)"|(\S+)')


@dataclass
class ExampleFilter:
    task_id: uuid.UUID | None = None
    round_ids: Sequence[uuid.UUID] = ()
    author_ids: Sequence[uuid.UUID] = ()
    labels: Sequence[str] = ()
    facets: dict[str, Sequence[str]] = field(default_factory=dict)  # field -> any of these values
    fooled: bool | None = None
    validation_states: Sequence[str] = ()
    statuses: Sequence[str] = NOT_DRAFT
    text: str = ""
    min_disagreements: int | None = None
    min_flags: int | None = None
    perturbations_only: bool = False
    review_states: Sequence[str | None] = ()  # "accepted", "returned"; None = not reviewed yet
    objected: bool | None = None  # True: a validator (peer or lead) said incorrect or flagged it; False: none did
    # the adaptive suite's generated variants: None: with the rest (Data), False: left out (Review: what people
    # wrote), True: only them
    variants: bool | None = None


@dataclass(frozen=True)
class ExampleRow:
    id: uuid.UUID
    task_code: str
    round_number: int
    author: str
    text: str
    true_label: str | None
    model_fooled: bool | None
    status: str
    validation_state: str
    validation_count: int
    disagreement_count: int
    flag_count: int
    decided_verdict: str | None
    submitted_at: datetime | None
    perturbation_of: uuid.UUID | None
    edit_distance: int | None
    meta: dict[str, Any]
    review_state: str | None = None
    review_comment: str | None = None
    decided_label: str | None = None
    objections: int = 0  # verdicts that disagree with the author: incorrect or flagged


ROWID: ColumnClause[int] = literal_column("examples.rowid")
SORT_KEYS = {
    "submitted_at": Example.submitted_at,
    "text": Example.text,
    "label": Example.true_label,
    "fooled": Example.model_fooled,
    "status": Example.status,
    "validation_state": Example.validation_state,
    "validations": Example.validation_count,
    "disagreements": Example.disagreement_count,
    "flags": Example.flag_count,
    "round": Round.number,
    "author": Person.display_name,
    "review_state": Example.review_state,
    "decided": Example.decided_verdict,
    "objections": Example.objection_count,
}


def fts_terms(query: str) -> tuple[list[str], list[str]]:
    """Split a search box's text into FTS phrases and short substrings; quotes keep phrases whole."""
    long_terms: list[str] = []
    short_terms: list[str] = []
    for quoted, bare in _TERMS.findall(query):
        term = (quoted or bare).strip()
        if term:
            (long_terms if len(term) >= MIN_FTS_TERM else short_terms).append(term)
    return long_terms, short_terms


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class ReviewQueries:
    def __init__(self, db: Database):
        self.db = db

    def _filtered(self, columns, flt: ExampleFilter) -> Select:
        query = select(*columns).select_from(Example)
        conditions: list[ColumnElement[bool]] = [Example.status.in_(list(flt.statuses))]
        if flt.task_id is not None:
            conditions.append(Example.task_id == flt.task_id)
        if flt.round_ids:
            conditions.append(Example.round_id.in_(list(flt.round_ids)))
        if flt.author_ids:
            conditions.append(Example.author_id.in_(list(flt.author_ids)))
        if flt.labels:
            conditions.append(Example.true_label.in_(list(flt.labels)))
        if flt.fooled is not None:
            conditions.append(Example.model_fooled.is_(flt.fooled))
        if flt.validation_states:
            conditions.append(Example.validation_state.in_(list(flt.validation_states)))
        if flt.min_disagreements is not None:
            conditions.append(Example.disagreement_count >= flt.min_disagreements)
        if flt.min_flags is not None:
            conditions.append(Example.flag_count >= flt.min_flags)
        if flt.objected is not None:
            conditions.append(Example.objection_count > 0 if flt.objected else Example.objection_count == 0)
        if flt.perturbations_only:
            conditions.append(Example.perturbation_of.is_not(None))
        if flt.variants is True:
            conditions.append(sql_variant(Example.source))
        elif flt.variants is False and self._any_variants():  # no variant: the covering indexes answer as before
            conditions.append(sql_not_variant(Example.source))
        if flt.review_states:
            named = [state for state in flt.review_states if state is not None]
            either = [Example.review_state.in_(named)] if named else []
            if None in flt.review_states:
                either.append(Example.review_state.is_(None))
            conditions.append(or_(*either))
        for name, values in flt.facets.items():
            if values:
                facet = aliased(ExampleFacet)
                conditions.append(
                    Example.id.in_(select(facet.example_id).where(facet.field == name, facet.value.in_(list(values))))
                )
        long_terms, short_terms = fts_terms(flt.text)
        if long_terms:
            phrase = " AND ".join('"' + term.replace('"', '""') + '"' for term in long_terms)
            conditions.append(
                Example.id.in_(select(text("example_id")).select_from(text("example_fts")).where(text("example_fts MATCH :fts")))
            )
            query = query.params(fts=phrase)
        for term in short_terms:
            conditions.append(Example.text.ilike(f"%{_escape_like(term)}%", escape="\\"))
        return query.where(and_(*conditions))

    def _any_variants(self) -> bool:
        """Whether the desk holds any variant (one look through the source index)."""
        with self.db.read() as session:
            return session.scalar(select(Example.id).where(sql_variant(Example.source)).limit(1)) is not None

    def rows(
        self,
        flt: ExampleFilter,
        *,
        sort: str = "submitted_at",
        descending: bool = True,
        offset: int = 0,
        limit: int = 100,
    ) -> list[ExampleRow]:
        if sort not in SORT_KEYS:
            raise DynadeskError(f"Cannot sort by '{sort}'; choose one of {', '.join(SORT_KEYS)}.")
        if sort == "round" and flt.task_id is not None:
            return self._rows_by_round(flt, descending, offset, limit)
        return self._page(flt, SORT_KEYS[sort], descending, offset, limit)

    def _rows_by_round(self, flt: ExampleFilter, descending: bool, offset: int, limit: int) -> list[ExampleRow]:
        """Sorted by round number: no index serves (round number, rowid) across the join, and
        sorting 100k rows for it took ~500 ms. A task has a handful of rounds, so walk them in
        order and page within each by rowid; the order is the same."""
        with self.db.read() as session:
            query = select(Round.id).where(Round.task_id == flt.task_id)
            if flt.round_ids:
                query = query.where(Round.id.in_(list(flt.round_ids)))
            order = Round.number.desc() if descending else Round.number.asc()
            round_ids = list(session.scalars(query.order_by(order)))
        rows: list[ExampleRow] = []
        offset = max(0, offset)
        for round_id in round_ids:
            if len(rows) >= limit:
                break
            one_round = dataclasses.replace(flt, round_ids=[round_id])
            if offset:
                in_round = self.count(one_round)
                if offset >= in_round:
                    offset -= in_round
                    continue
            rows.extend(self._page(one_round, ROWID, descending, offset, limit - len(rows)))
            offset = 0
        return rows

    def _page(self, flt: ExampleFilter, key, descending: bool, offset: int, limit: int) -> list[ExampleRow]:
        # Ties break on rowid, which every single-column index already carries, so an index
        # on the sort key serves the page without sorting the whole table.
        order = [key.desc() if descending else key.asc(), ROWID.desc() if descending else ROWID.asc()]
        query = (
            self._filtered(
                [
                    Example.id, Task.code, Round.number, Person.display_name, Example.text, Example.true_label,
                    Example.model_fooled, Example.status, Example.validation_state, Example.validation_count,
                    Example.disagreement_count, Example.flag_count, Example.decided_verdict, Example.submitted_at,
                    Example.perturbation_of, Example.edit_distance, Example.meta, Example.review_state,
                    Example.review_comment, Example.decided_label, Example.objection_count,
                ],
                flt,
            )
            .join(Task, Task.id == Example.task_id)
            .join(Round, Round.id == Example.round_id)
            .join(Person, Person.id == Example.author_id)
            .order_by(*order)
            .offset(max(0, offset))
            .limit(max(0, limit))
        )
        with self.db.read() as session:
            return [ExampleRow(*row) for row in session.execute(query)]

    def count(self, flt: ExampleFilter) -> int:
        with self.db.read() as session:
            return session.scalar(self._filtered([func.count()], flt))

    def counts_by(self, flt: ExampleFilter, dimension: str) -> dict[str, int]:
        """How many matching examples fall in each value of a column or a metadata facet."""
        columns = {
            "label": Example.true_label,
            "status": Example.status,
            "validation_state": Example.validation_state,
            "fooled": Example.model_fooled,
            "round": Example.round_id,
            "author": Example.author_id,
            "review_state": Example.review_state,
        }
        with self.db.read() as session:
            if dimension in columns:
                column = columns[dimension]
                query = self._filtered([column, func.count()], flt).group_by(column)
            else:
                query = (
                    self._filtered([ExampleFacet.value, func.count()], flt)
                    .join(ExampleFacet, and_(ExampleFacet.example_id == Example.id, ExampleFacet.field == dimension))
                    .group_by(ExampleFacet.value)
                )
            return {str(value): int(count) for value, count in session.execute(query)}

    def summary(self, flt: ExampleFilter) -> dict[str, int]:
        """The review tab's figures for the matching examples: how many there are, how many have
        disagreeing or flagging verdicts, how many are decided, unvalidated, fooled, returned, accepted,
        and how many a validator said were incorrect or flagged (``objected``).

        Grouped by the columns of ``ix_examples_review_summary`` in its order, so that for a whole
        task SQLite streams the covering index without sorting (~40% faster than summing
        expressions row by row); the few dozen groups are added up here."""
        columns = [Example.status, Example.validation_state, Example.model_fooled, Example.review_state,
                   Example.disagreement_count, Example.flag_count]
        out = dict.fromkeys(["examples", "disagreements", "flagged", "decided", "unvalidated", "fooled", "returned",
                             "accepted"], 0)
        with self.db.read() as session:
            rows = session.execute(self._filtered([*columns, func.count()], flt).group_by(*columns))
            for _status, state, fooled, review, disagreements, flags, n in rows:
                out["examples"] += n
                out["disagreements"] += n if disagreements else 0
                out["flagged"] += n if flags else 0
                out["decided"] += n if state == "decided" else 0
                out["unvalidated"] += n if state == "unvalidated" else 0
                out["fooled"] += n if fooled else 0
                out["returned"] += n if review == "returned" else 0
                out["accepted"] += n if review == "accepted" else 0
        out["objected"] = self.count(dataclasses.replace(flt, objected=True)) if out["examples"] else 0
        return out
