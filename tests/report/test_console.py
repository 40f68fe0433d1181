"""The console: plain text when piped, rich tables and progress on a terminal; same content; the
searches' reporter (search.progress) a bar per open phase on a terminal, nothing when piped."""

from __future__ import annotations

import io

from rich.console import Console as RichConsole

from stratagem.report.console import Console
from stratagem.search.progress import SILENT, phase
from stratagem.report.tables import Table

TABLE = Table.of(("devices", "time"), [(1, "4 s"), (16, "0.3 s")], "profiling")


def test_piped_output_is_the_plain_table_and_no_progress(capsys):
    out = Console(rich=False)
    assert list(out.track([1, 2, 3], "counting")) == [1, 2, 3]
    with out.status("working"):
        out.table(TABLE)
    assert capsys.readouterr().out == TABLE.to_text() + "\n"


def test_a_terminal_gets_a_rich_table_and_a_progress_bar_over_every_item(capsys):
    out = Console(rich=True)
    assert list(out.track(range(5), "counting")) == list(range(5))
    with out.status("working"):
        out.table(TABLE)
    text = capsys.readouterr().out
    assert "profiling" in text and "0.3 s" in text and "16" in text
    assert "┃" in text or "│" in text or "|" in text                       # drawn as a rich table


def test_piped_the_searches_report_to_no_one(capsys):
    out = Console(rich=False)
    with out.progress() as progress:
        assert progress is SILENT
    out.note("Ctrl-C: stopping")
    assert capsys.readouterr() == ("", "Ctrl-C: stopping\n")


def test_a_terminal_draws_each_open_phase_with_its_count_and_closes_what_is_left():
    out, screen = Console(rich=True), io.StringIO()
    out._console = RichConsole(file=screen, force_terminal=True, width=120)
    with out.progress() as progress:
        with phase(progress, "cost tables: ops", 12):
            progress.advance(12)
            with phase(progress, "FT pass 1: eliminations", 30):
                progress.advance(7)
                progress._bars.refresh()
                drawn = screen.getvalue()
        progress.phase("left open", None)
    assert "cost tables: ops" in drawn and "12/12" in drawn and "FT pass 1: eliminations" in drawn and "7/30" in drawn
    assert not progress._open and not progress._bars.live.is_started
