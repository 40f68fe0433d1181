"""Output for the commands: rich tables, spinners and progress bars on a terminal; plain text when
stdout is not a terminal (pipes, files, tests), where spinners and bars print nothing at all.

    out = Console()                       # decides once: rich when stdout is a TTY
    with out.status("capturing gpt-tiny"):  ...
    for n in out.track(counts, "device counts"):  ...
    with out.progress() as progress:      # a search.progress reporter: a bar per open phase
        plan = sg.search(...)             #   (search phases nest: one line each, innermost last)
    out.table(Table.of(columns, rows, title))
    out.note("Ctrl-C: stopping")          # to stderr when piped (stdout keeps the results)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from stratagem.report.tables import Table
from stratagem.search.progress import SILENT, Progress
from rich.console import Console as RichConsole
from rich.progress import (
    BarColumn, Progress as RichProgress, ProgressColumn, SpinnerColumn, Task, TaskID, TextColumn,
    TimeElapsedColumn, track,
)
from rich.text import Text
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

    def note(self, text: str) -> None:
        """A remark beside the results: on the terminal above any bars; to stderr when piped."""
        if self.rich:
            self._rich_console().print(text, markup=False, style="yellow")
        else:
            print(text, file=sys.stderr, flush=True)

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

    @contextlib.contextmanager
    def progress(self) -> Iterator[Progress]:
        """A reporter for the searches (search.progress): bars on a terminal, silent when piped;
        whatever phases are still open when the block ends are closed."""
        if not self.rich:
            yield SILENT
            return
        bars = Bars(self._rich_console())
        try:
            yield bars
        finally:
            bars.close()


class Bars:
    """search.progress.Progress on a rich console: one line per open phase (the innermost last),
    a bar and a count where the phase has a total, a spinner and a count where it has none; a
    phase's line goes when it is done, the display when no phase is open."""

    def __init__(self, console: RichConsole):
        self._bars = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), _Count(),
                                  TimeElapsedColumn(), console=console, transient=True)
        self._open: list[TaskID] = []

    def phase(self, name: str, total: int | None = None) -> None:
        if not self._open:
            self._bars.start()
        self._open.append(self._bars.add_task(name, total=total))

    def advance(self, n: int = 1) -> None:
        if self._open and n:
            self._bars.advance(self._open[-1], n)

    def done(self) -> None:
        if self._open:
            self._bars.remove_task(self._open.pop())
        if not self._open:
            self._bars.stop()

    def close(self) -> None:
        while self._open:
            self.done()
        self._bars.stop()


class _Count(ProgressColumn):
    """"done/total", or the count alone where the phase has no total (nothing before the first)."""

    def render(self, task: Task) -> Text:
        done = int(task.completed)
        if task.total is None:
            return Text(f"{done:,}" if done else "", style="progress.download")
        return Text(f"{done:,}/{int(task.total):,}", style="progress.download")
