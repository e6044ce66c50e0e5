"""What every command of the CLI shares: the desk it works on, and how it prints a table."""

from __future__ import annotations

import click

from app.core.text import printable


class Context:
    def __init__(self, data_dir: str | None):
        self.data_dir = data_dir
        self._desk = None
        self.lists_task_problems = False  # `tasks list` shows bad task files itself, instead of a warning

    @property
    def desk(self):
        if self._desk is None:
            from app.core.desk import Desk

            self._desk = Desk(self.data_dir)
            self._desk.db.checked()
            if not self.lists_task_problems:
                for problem in self._desk.catalog.problems:
                    click.echo(f"Warning: {problem}; the file was skipped (`dynadesk tasks list` shows it).", err=True)
        return self._desk

    def close(self) -> None:
        if self._desk is not None:
            self._desk.close()


pass_context = click.make_pass_decorator(Context)



def format_table(headers: list[str], rows: list[list]) -> str:
    cells = [[printable(str(c)) for c in row] for row in [headers, *rows]]  # a cell cannot steer the terminal
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) if rows else "\n".join(lines) + "\n(none)"
