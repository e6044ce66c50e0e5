"""The main window's small dialogs' view-models, without Qt."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from app.core.domain import Role
from app.views.shell import Choice, import_view, profiles_view, task_choices


def test_profiles_show_name_and_role_and_offer_every_role():
    ada = SimpleNamespace(id=uuid.UUID(int=1), display_name="Ada", role=Role.LEAD)
    view = profiles_view([ada], str(ada.id))
    assert view.people == (Choice("Ada — lead", str(ada.id)),) and view.current_id == str(ada.id)
    assert view.roles == tuple(Role)


def test_import_choices_show_descriptions_and_task_names():
    tasks = task_choices([SimpleNamespace(code="nli", name="Natural language inference")])
    assert tasks == (Choice("Natural language inference", "nli"),)
    view = import_view([SimpleNamespace(name="jsonl", description="Dynadesk JSONL")], tasks)
    assert view.formats == (Choice("Dynadesk JSONL", "jsonl"),) and view.tasks == tasks


def test_on_a_team_desk_only_the_token_holder_is_offered_and_nobody_can_be_made_up():
    ann = SimpleNamespace(id=uuid.UUID(int=1), display_name="Ann", role=Role.ANNOTATOR)
    lee = SimpleNamespace(id=uuid.UUID(int=2), display_name="Lee", role=Role.LEAD)
    view = profiles_view([ann, lee], str(ann.id), "https://team.example")
    assert view.people == (Choice("Ann — annotator", str(ann.id)),) and view.roles == ()
    assert not view.can_switch and "https://team.example" in view.team_note
    assert profiles_view([ann, lee], str(ann.id)).can_switch
