"""The console: plain text when piped, rich tables and progress on a terminal; same content."""

from __future__ import annotations

from stratagem.report.console import Console
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
