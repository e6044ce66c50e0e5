"""The profile dialog with the working person's Wellbeing section: read on the database
worker, shown, and the person's choices stored in the desk's settings (their own, never synced).
A changed choice applies at once: the Validate tab fetches its example again, masked (or not) and
with the new opt-outs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.changes import Changes, Data
from app.core.errors import DynadeskError
from app.core.wellbeing.opt_outs import TARGET_GROUPS_FIELD
from app.views.shell import profiles_view
from app.views.wellbeing import WellbeingChoice, chosen_profile, wellbeing_section
from widgets.profile_dialog import ProfileDialog

if TYPE_CHECKING:
    from app.core.desk import Desk


def profile_dialog_data(desk: Desk, team_server: str | None = None
                        ) -> tuple[list[Any], Any, list[tuple[str, str, list[str]]], str | None]:
    """On the worker: everyone, the working person, each task's target groups (code, name, groups), and
    ``team_server`` (the team server this desk syncs with, a token held for it; None on a desk of its own)."""
    person = desk.current_person()
    groups = []
    for task in desk.tasks.tasks():
        definition = desk.tasks.definition(task.id)
        field = next((m for m in definition.metadata if m.name == TARGET_GROUPS_FIELD), None)
        if field is not None:
            groups.append((task.code, task.name, list(field.choices)))
    return desk.people.all(), person, groups, team_server


def profile_dialog(window, data: tuple[list[Any], Any, list[tuple[str, str, list[str]]], str | None]
                   ) -> ProfileDialog:
    """The dialog, its Wellbeing section wired to store the person's choices."""
    everyone, person, groups, team_server = data
    desk: Desk = window.desk
    section = wellbeing_section(desk.settings.wellbeing_for(str(person.id)), groups) if person else None
    dialog = ProfileDialog(profiles_view(everyone, desk.settings.current_person_id, team_server), window, section,
                           person.display_name if person else "")
    if dialog.wellbeing is not None:
        dialog.wellbeing.chosen.connect(lambda choice: store_wellbeing(window, dialog, str(person.id), choice))
    return dialog


def store_wellbeing(window, dialog: ProfileDialog, person_id: str, choice: WellbeingChoice) -> None:
    desk: Desk = window.desk
    before = desk.settings.wellbeing
    try:
        profile = chosen_profile(choice, desk.settings.wellbeing_for(person_id))
        desk.settings.wellbeing = {**before, person_id: profile}
        desk.save_settings()
    except (ValueError, OSError, DynadeskError) as exc:  # said in the dialog; the old choices stay in force
        desk.settings.wellbeing = before
        if dialog.wellbeing is not None:
            dialog.wellbeing.show_saved(f"Not saved: {exc}")
        return
    if dialog.wellbeing is not None:
        dialog.wellbeing.show_saved("✓ Saved. Validate and the reading views use them now.")
    desk.changes.publish(Changes(Data.PREFERENCES))  # each reading view shows its text as now chosen
