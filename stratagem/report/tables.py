"""A table as a value, written as aligned text, Markdown or CSV (and as a rich table by `console`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""
    numeric: tuple[bool, ...] = ()          # right-align these columns (default: all but the first)

    @staticmethod
    def of(columns: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> "Table":
        cells = tuple(tuple(_cell(c) for c in row) for row in rows)
        return Table(tuple(columns), cells, title)

    def right_aligned(self, i: int) -> bool:
        return self.numeric[i] if self.numeric else i > 0

    def to_text(self) -> str:
        widths = [max(len(r[i]) for r in (self.columns, *self.rows)) for i in range(len(self.columns))]
        lines = [self.title] if self.title else []
        for row in (self.columns, *self.rows):
            cells = [c.rjust(w) if self.right_aligned(i) else c.ljust(w)
                     for i, (c, w) in enumerate(zip(row, widths))]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def to_markdown(self) -> str:
        align = ["---:" if self.right_aligned(i) else "---" for i in range(len(self.columns))]
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "|".join(align) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in self.rows]
        return "\n".join(lines)

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        return buffer.getvalue()


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
