"""Tables as aligned text, Markdown and CSV."""

from __future__ import annotations

from stratagem.report.tables import Table


def test_one_table_three_ways():
    table = Table.of(("model", "time s"), [("rnn", 0.25), ("a|b", None)], "title")
    text = table.to_text().splitlines()
    assert text[0] == "title" and text[1].split() == ["model", "time", "s"] and text[2].split() == ["rnn", "0.25"]
    markdown = table.to_markdown().splitlines()
    assert markdown[:2] == ["| model | time s |", "|---|---:|"] and markdown[3] == "| a\\|b | - |"
    assert table.to_csv() == "model,time s\nrnn,0.25\na|b,-\n"
