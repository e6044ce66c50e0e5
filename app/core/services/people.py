"""Local profiles: who is working at this desk, and in which role."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from app.core.domain import Role
from app.core.errors import DynadeskError, NotFound
from app.core.storage.db import Database
from app.core.storage.models import Person


class PeopleService:
    def __init__(self, db: Database):
        self.db = db

    def create(self, display_name: str, role: Role | str = Role.ANNOTATOR, person_id: uuid.UUID | None = None) -> Person:
        name = " ".join(display_name.split())
        if not name:
            raise DynadeskError("A profile needs a display name.")
        if len(name) > 200:
            raise DynadeskError("A display name can have at most 200 characters.")
        role = Role(role)
        with self.db.write() as session:
            person = Person(display_name=name, role=role.value)
            if person_id is not None:
                person.id = person_id
            session.add(person)
            session.flush()
            return person

    def get(self, person_id: uuid.UUID) -> Person:
        with self.db.read() as session:
            person = session.get(Person, person_id)
        if person is None:
            raise NotFound(f"There is no profile with id {person_id}.")
        return person

    def all(self) -> list[Person]:
        with self.db.read() as session:
            return list(session.scalars(select(Person).order_by(Person.display_name)))

    def by_name(self, display_name: str) -> Person | None:
        with self.db.read() as session:
            return session.scalar(select(Person).where(Person.display_name == display_name).limit(1))
