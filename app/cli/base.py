"""What every command of the CLI shares: the desk it works on, and how it prints a table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from app.core.formatting import text_table

if TYPE_CHECKING:
    from app.core.desk import Desk
    from sync.client import ClientFactory


class Context:
    def __init__(self, data_dir: str | None):
        self.data_dir = data_dir
        self._desk: Desk | None = None
        self._sync_clients: ClientFactory | None = None
        self.lists_task_problems = False  # `tasks list` shows bad task files itself, instead of a warning
        self.assist_task = ""  # the task `suggest-words --task` names, for its subcommands

    @property
    def desk(self) -> Desk:
        if self._desk is None:
            from app.core.desk import Desk

            self._desk = Desk(self.data_dir)
            self._desk.db.checked()
            if not self.lists_task_problems:
                for problem in self._desk.catalog.problems:
                    click.echo(f"Warning: {problem}; the file was skipped (`dynadesk tasks list` shows it).", err=True)
        return self._desk

    @property
    def sync_clients(self) -> ClientFactory:
        """Where this command's sync clients are made (``sync.client.ClientFactory``, as the GUI's sync
        controller holds one): the one owner of the desk's tokens."""
        if self._sync_clients is None:
            from sync.client import ClientFactory

            self._sync_clients = ClientFactory(self.desk)
        return self._sync_clients

    def close(self) -> None:
        if self._desk is not None:
            self._desk.close()


pass_context = click.make_pass_decorator(Context)



def format_table(headers: list[str], rows: list[list]) -> str:
    lines, _widths = text_table(headers, rows)
    return "\n".join(lines) if rows else "\n".join(lines) + "\n(none)"
