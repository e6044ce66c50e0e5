"""The application core for one data folder: database, settings, task catalog and services."""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core import paths
from app.core.adaptive_suite.service import AdaptiveSuite
from app.core.changes import Changes, Data
from app.core.domain import Role
from app.core.errors import DynadeskError
from app.core.quality.near_duplicates import NearDuplicateIndex
from app.core.services.dashboard import DashboardService
from app.core.services.examples import ExampleService
from app.core.services.lead import LeadReviewService
from app.core.services.models import ModelService
from app.core.services.people import PeopleService
from app.core.services.review import ReviewQueries
from app.core.services.rounds import RoundService
from app.core.services.stats import StatsService
from app.core.services.tasks import TaskService
from app.core.services.validation import ValidationService
from app.core.settings import Settings, SettingsStore
from app.core.storage.db import Database
from app.core.task_settings import TaskSettings
from app.core.tasks.definition import builtin_tasks_dir, load_catalog
from app.core.wellbeing.harmful import FILENAME as HARMFUL_FILENAME
from app.core.wellbeing.harmful import HarmfulLabels
from app.core.wellbeing.service import WellbeingService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredSettings:
    """A task's settings as a lead stored them, and, when the agreement threshold was set, how many
    of the task's examples are decided under it here."""

    settings: TaskSettings
    decided: int | None = None


class Desk:
    def __init__(self, data_dir: str | os.PathLike | None = None):
        self.root: Path = paths.data_dir(data_dir)
        self.db = Database(paths.database_path(self.root))
        self.changes = self.db.changes  # what each store changed: the GUI routes it to the views it touches
        self.settings_store = SettingsStore(paths.settings_path(self.root))
        self.settings: Settings = self.settings_store.load()
        self.catalog = load_catalog(builtin_tasks_dir(), paths.user_tasks_dir(self.root))
        for problem in self.catalog.problems:
            log.warning("task definition skipped: %s", problem)
        self.tasks = TaskService(self.db, self.catalog)
        self.people = PeopleService(self.db)
        self.models = ModelService(self.db)
        self.examples = ExampleService(self.db, self.tasks)
        self.validation = ValidationService(self.db, self.tasks)
        self.stats = StatsService(self.db)
        self.rounds = RoundService(self.db, self.tasks, self.models)
        self.review = ReviewQueries(self.db)
        self.lead = LeadReviewService(self.db, self.validation)
        self.adaptive_suite = AdaptiveSuite(self.db, self.tasks, self.examples, self.lead,
                                            lambda: self.current_person_id)
        self.dashboard = DashboardService(self.db, self.tasks)
        # Built per task on first use (from a worker in the GUI), then kept current from the change log.
        self.near_duplicates = NearDuplicateIndex(
            self.db, lambda task_id: self.tasks.settings(self.tasks.task_code(task_id)).quality.near_threshold)
        self.exposure = WellbeingService(self.db, _harmful_labels(self.root))
        self.tasks.sync_catalog()
        self.tasks.ensure_first_rounds()
        self._person_id: uuid.UUID | None = None

    def save_settings(self) -> None:
        self.settings_store.save(self.settings)

    def current_person(self):
        """The profile working at this desk, created on first use from the login name."""
        if self.settings.current_person_id:
            try:
                return self.people.get(uuid.UUID(self.settings.current_person_id))
            except (DynadeskError, ValueError):
                pass
        people = self.people.all()
        person = people[0] if people else self.people.create(_login_name(), Role.ANNOTATOR)
        self.switch_person(person.id)
        return person

    @property
    def current_person_id(self) -> uuid.UUID:
        """The working profile's id, queried once: the GUI thread asks for it on every action."""
        if self._person_id is None:
            self._person_id = self.current_person().id
        return self._person_id

    def switch_person(self, person_id: uuid.UUID) -> None:
        self.people.get(person_id)
        switched = str(person_id) != self.settings.current_person_id
        self._person_id = person_id
        self.settings.current_person_id = str(person_id)
        self.save_settings()
        if switched:  # whose work, queue and figures the views show
            self.changes.publish(Changes(Data.PROFILE))

    def reading_words(self, task_code: str, *, browsing: bool) -> tuple[str, ...]:
        """The words a reading view masks for the working person: the task's blur list where they
        chose the blur for this kind of view (reviewing, or browsing: Data, evaluation and comparison
        reports), none where they read it unmasked."""
        profile = self.settings.wellbeing_for(str(self.current_person_id))
        masked = profile.blur_browsing if browsing else profile.blur_validating
        return self.tasks.blur_words(task_code) if masked else ()

    def set_task_settings(self, lead_id: uuid.UUID, task_code: str, **changes: Any) -> StoredSettings:
        """A lead changes some of the task's settings (by ``TaskSettings`` field name; the others stay
        as they are in force here), for this desk and, once synced, for the team: the latest a lead of
        the team set is in force on the server and every desk of the team (README, Figures).

        Each value is checked (its own error says what is wrong; nothing is stored then). A change of
        the agreement threshold decides the task's examples again here."""
        self.lead.require_lead(lead_id)
        definition = self.tasks.definition_by_code(task_code)
        current = self.tasks.settings(task_code)
        chosen = current.changed(**changes)
        if chosen.agreement_threshold == definition.agreement_threshold:
            chosen = chosen.changed(agreement_threshold=None)  # the task's own number keeps no override
        if chosen.assist_words != current.assist_words:  # lists this task has, in their shapes
            self.tasks.assist_lexicon(task_code).check_changes(chosen.assist_words)
        self.tasks.set_settings(task_code, chosen, lead_id)
        decided = None
        if "agreement_threshold" in changes:
            decided = self.validation.resummarise_task(self.tasks.task(task_code).id)
        return StoredSettings(chosen, decided)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Desk:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _harmful_labels(root: Path) -> HarmfulLabels:
    """The bundled hateful labels, extended by this desk's own file; a broken file is named and left out."""
    try:
        return HarmfulLabels.load(root / "wellbeing" / HARMFUL_FILENAME)
    except DynadeskError as exc:
        log.warning("%s The bundled list is used meanwhile.", exc)
        return HarmfulLabels.load()


def _login_name() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER") or "Annotator"
