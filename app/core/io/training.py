"""Training data: a labelled CSV file read by the one row reader (``app.core.io.rows``), handed to
``local_models.train`` as its texts and labels (local_models reads no files of ours itself)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from app.core.errors import DynadeskError, ImportProblem
from app.core.io.rows import csv_table, read_text
from local_models.errors import TrainingFailed
from local_models.train import LabelledData, labelled_data


def read_labelled_csv(path: Path, text_column: str, label_column: str, *,
                      label_map: Mapping[str, str] | None = None, unescape_html: bool = False,
                      drop_duplicates: bool = True, context_column: str | None = None) -> LabelledData:
    """Texts (with ``context_column``: (context, text) pairs) and integer labels from a CSV file; every problem
    is a ``TrainingFailed``."""
    path = Path(path)
    if not path.is_file():
        raise TrainingFailed(f"There is no CSV file at {path}.")
    try:
        content = read_text(path, "CSV file")
    except DynadeskError as exc:
        if isinstance(exc.__cause__, UnicodeDecodeError):
            raise TrainingFailed(f"{path.name} is not a readable UTF-8 CSV file ({exc.__cause__}).") from exc
        raise TrainingFailed(str(exc)) from exc
    header, table = csv_table(content)
    rows = []
    for _line, row in table:
        if isinstance(row, ImportProblem):
            raise TrainingFailed(f"{path.name} is not a readable UTF-8 CSV file ({row}).")
        rows.append(row)
    return labelled_data(path, header, rows, text_column, label_column, label_map=label_map,
                         unescape_html=unescape_html, drop_duplicates=drop_duplicates, context_column=context_column)
