"""Output for the commands: rich tables, spinners and progress bars on a terminal; plain text when
stdout is not a terminal (pipes, files, tests), where spinners and bars print nothing at all.

    out = Console()                       # decides once: rich when stdout is a TTY
    with out.status("capturing gpt-tiny"):  ...
    for n in out.track(counts, "device counts"):  ...
    out.table(Table.of(columns, rows, title))
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from stratagem.report.tables import Table
from rich.console import Console as RichConsole
from rich.progress import track
from rich.table import Table as RichTable

T = TypeVar("T")


class Console:
    def __init__(self, rich: bool | None = None):
        self.rich = sys.stdout.isatty() if rich is None else rich
        self._console = None

    def _rich_console(self):
        if self._console is None:
            self._console = RichConsole(highlight=False)
        return self._console

    def print(self, text: str = "") -> None:
        if self.rich:
            self._rich_console().print(text, markup=False)
        else:
            print(text, flush=True)

    def table(self, table: Table) -> None:
        if not self.rich:
            print(table.to_text(), flush=True)
            return
        view = RichTable(title=table.title or None, title_justify="left")
        for i, column in enumerate(table.columns):
            view.add_column(column, justify="right" if table.right_aligned(i) else "left", overflow="fold")
        for row in table.rows:
            view.add_row(*row)
        self._rich_console().print(view)

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner while the block runs (terminal only)."""
        if not self.rich:
            yield
            return
        with self._rich_console().status(text):
            yield

    def track(self, items: Sequence[T] | Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
        """A progress bar over `items` (terminal only)."""
        if not self.rich:
            yield from items
            return
        yield from track(items, description=description, total=total, console=self._rich_console(),
                         transient=True)
