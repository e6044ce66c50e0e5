"""The application core for one data folder: database, settings, task catalog and services."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from app.core import paths
from app.core.changes import Changes, Data
from app.core.domain import Role
from app.core.errors import DynadeskError
from app.core.quality.near_duplicates import NearDuplicateIndex
from app.core.assist.lexicon import WordChanges
from app.core.quality.settings import QualitySettings
from app.core.services.dashboard import DashboardService
from app.core.services.examples import ExampleService
from app.core.services.lead import LeadReviewService
from app.core.services.models import ModelService
from app.core.services.people import PeopleService
from app.core.services.review import ReviewQueries
from app.core.services.rounds import RoundService
from app.core.services.stats import StatsService
from app.core.services.tasks import MAX_THRESHOLD, TaskService
from app.core.services.validation import ValidationService
from app.core.settings import Settings, SettingsStore
from app.core.storage.db import Database
from app.core.tasks.definition import builtin_tasks_dir, load_catalog
from app.core.wellbeing.word_list import clean_words
from app.core.wellbeing.harmful import FILENAME as HARMFUL_FILENAME, HarmfulLabels
from app.core.wellbeing.service import WellbeingService

log = logging.getLogger(__name__)


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
        self.dashboard = DashboardService(self.db, self.tasks)
        # Built per task on first use (from a worker in the GUI), then kept current from the change log.
        self.near_duplicates = NearDuplicateIndex(
            self.db, lambda task_id: self.tasks.quality_settings(self.tasks.task_code(task_id)).near_threshold)
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

    def set_agreement_threshold(self, lead_id: uuid.UUID, task_code: str, threshold: int) -> int:
        """A lead sets how many matching peer verdicts decide an example of the task on this desk, and
        the task's examples are decided again under it. Returns how many are decided now.

        Queued for the team: once synced, the server and the team's desks decide the team's examples
        of the task with it too (the latest a lead of the team set is in force; README, Figures)."""
        self.lead.require_lead(lead_id)
        task = self.tasks.task(task_code)
        if not 1 <= threshold <= MAX_THRESHOLD:
            raise DynadeskError(f"The number of matching verdicts must be between 1 and {MAX_THRESHOLD}.")
        self.tasks.set_agreement_threshold(task_code, threshold, lead_id)
        return self.validation.resummarise_task(task.id)

    def set_quality_settings(self, lead_id: uuid.UUID, task_code: str, settings: QualitySettings) -> None:
        """A lead sets the task's near-duplicate threshold and alert lines, for this desk and, once
        synced, for the team (they travel with the agreement threshold)."""
        self.lead.require_lead(lead_id)
        self.tasks.task(task_code)
        self.tasks.set_quality_settings(task_code, settings, lead_id)

    def set_assist_words(self, lead_id: uuid.UUID, task_code: str, changes: WordChanges) -> None:
        """A lead changes the task's assistant word lists, for this desk and, once synced, for the
        team (they travel with the task's other settings). Lists and entries are checked first."""
        self.lead.require_lead(lead_id)
        self.tasks.task(task_code)
        self.tasks.assist_lexicon(task_code).check_changes(changes)
        self.tasks.set_assist_words(task_code, changes, lead_id)

    def set_blur_words(self, lead_id: uuid.UUID, task_code: str, words: Iterable[str]) -> tuple[str, ...]:
        """A lead sets the words they add to the task's blur list (all of them: an empty list removes
        theirs), for this desk and, once synced, for the team (they travel with the task settings).
        Returns the words as stored; ``InvalidWordList`` names entries that cannot be matched."""
        self.lead.require_lead(lead_id)
        self.tasks.task(task_code)
        cleaned = clean_words(words)
        self.tasks.set_blur_words(task_code, cleaned, lead_id)
        return cleaned

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Desk":
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
