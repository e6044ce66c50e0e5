"""A person's wellbeing choices, kept on their desk (never synced: they are the person's own)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WellbeingProfile(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    # Off by default where a person reads as a writer, on where they read as a validator.
    blur_validating: bool = True  # Validate, Review
    blur_browsing: bool = False  # Data, the evaluation's failing cases
    # The assistant's "description to slur" edits: off unless the writer asks for them (the writer
    # never typed those slurs; they are shown masked while blur_validating is on, like any reading view).
    suggest_slurs: bool = False
    # task code -> target groups this person is not served in the validation queue
    opted_out_groups: dict[str, list[str]] = Field(default_factory=dict)
    break_after_min: int = Field(default=50, ge=5, le=480)  # continuous work with hateful content
    daily_break_after_min: int = Field(default=240, ge=10, le=1440)  # a longer break after this daily total
    long_break_min: int = Field(default=15, ge=1, le=120)
    short_break_min: int = Field(default=5, ge=1, le=60)

    def opted_out(self, task_code: str) -> frozenset[str]:
        return frozenset(self.opted_out_groups.get(task_code, ()))
