"""People and their tokens: authenticate, add a person, replace or switch off a token, list people."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.domain import Role
from app.core.errors import DynadeskError
from app.core.text import control_characters
from sync.protocol import TOKEN_PREFIX
from sync.server.db import ServerDatabase
from sync.server.models import Person
from sync.server.store.changelog import record_changes


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)  # 256 random bits


def hash_token(token: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is enough: nobody can search that space, and
    # an exact-match index on the hash finds the person in one lookup. Slow password hashes
    # (argon2, bcrypt) protect guessable passwords, and would cost ~50 ms on every request.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def authenticate(db: ServerDatabase, token: str | None) -> Person | None:
    if not token or len(token) > 200 or not token.startswith(TOKEN_PREFIX):
        return None
    digest = hash_token(token)
    with db.read() as session:
        person = session.scalar(select(Person).where(Person.token_hash == digest))
    if person is None or not person.active or not hmac.compare_digest(person.token_hash or "", digest):
        return None
    return person


def add_person(db: ServerDatabase, name: str, role: Role | str, team: str = "default",
               person_id: uuid.UUID | None = None) -> tuple[Person, str]:
    """A person with a new token. The token is returned once and only its hash is kept."""
    name = " ".join(name.split())
    if not name or len(name) > 200:
        raise DynadeskError("A person needs a display name of 1 to 200 characters.")
    problem = name_problem(name)
    if problem:
        raise DynadeskError(f"The display name {problem}.")
    role = Role(role)
    token = new_token()

    def work(session: Session) -> Person:
        if person_id is not None and session.get(Person, person_id) is not None:
            raise DynadeskError(f"There is already a person with id {person_id} on this server.")
        person = Person(display_name=name, role=role.value, team=team, token_hash=hash_token(token))
        if person_id is not None:
            person.id = person_id
        session.add(person)
        session.flush()
        record_changes(session, [(person.id, "person", person.team, None)])
        return person

    return db.write_retrying(work), token


def name_problem(name: str) -> str | None:
    found = control_characters(name)
    if found:
        return (f"holds control characters ({', '.join(found)}), which could rewrite what a terminal shows; "
                "use letters, digits, spaces and punctuation")
    return None


def new_token_for(db: ServerDatabase, who: str) -> tuple[Person, str]:
    """Replace a person's token (the old one stops working at once)."""
    token = new_token()

    def work(session: Session) -> Person:
        person = _find_person(session, who)
        person.token_hash = hash_token(token)
        person.active = True
        return person

    return db.write_retrying(work), token


def set_active(db: ServerDatabase, who: str, active: bool) -> Person:
    def work(session: Session) -> Person:
        person = _find_person(session, who)
        person.active = active
        return person

    return db.write_retrying(work)


def _find_person(session: Session, who: str) -> Person:
    try:
        person = session.get(Person, uuid.UUID(who))
    except ValueError:
        matches = list(session.scalars(select(Person).where(Person.display_name == who, Person.token_hash.is_not(None))))
        if len(matches) > 1:
            raise DynadeskError(f"{len(matches)} people are called '{who}'; give the id instead.") from None
        person = matches[0] if matches else None
    if person is None or person.token_hash is None:
        raise DynadeskError(f"There is no person '{who}' with an account on this server.")
    return person


def people(db: ServerDatabase) -> list[Person]:
    with db.read() as session:
        return list(session.scalars(select(Person).where(Person.token_hash.is_not(None))
                                    .order_by(Person.team, Person.display_name)))
