"""A table that stays readable at any width: printed as the table where it fits, else as one block per row.

A CI log or a pipe is 80 columns. A rich table wider than that folds its name columns into fragments
(``runs/d`` / ``emo/ev`` / ``al_stu`` / ``dent``) and cuts its headers to an ellipsis (``catego…``), which
nobody can read back. :class:`FittedTable` measures the table against the width it is printed in and, when
it does not fit, prints each row as its names in full on one line (the first bare, the others as ``header
value``), then its values as ``header value`` pairs, wrapped between pairs, never inside one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


class FittedTable:
    """`table` (a rich Table built from `headers` and `rows`) where it fits; blocks where it does not. The
    first `names` columns of a row are its names (the block's first line); the rest are its values."""

    def __init__(self, table: Any, headers: Sequence[str], rows: Sequence[Sequence[str]], names: int = 1,
                 title: str | None = None, notes: Sequence[str] = ()) -> None:
        self.table = table
        self.headers = list(headers)
        self.rows = [list(r) for r in rows]
        self.names = names
        self.title = title
        self.notes = list(notes)

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.measure import Measurement
        from rich.text import Text

        natural = Measurement.get(console, options.update_width(10_000), self.table).maximum  # unclamped
        if natural <= options.max_width:
            yield self.table
            return
        width = max(20, options.max_width)
        if self.title:
            yield Text(self.title, style="bold")
        for row in self.rows:
            named = [f"{h} {v}" for h, v in zip(self.headers[1:self.names], row[1:self.names], strict=True)]
            yield Text("  ".join([row[0], *named]), style="bold")
            yield from (Text(line) for line in self.block_lines(row, width))
        yield from (Text(n) for n in self.notes)
        yield Text("")

    def block_lines(self, row: Sequence[str], width: int) -> list[str]:
        """The row's values as `header value` pairs, indented, wrapped between pairs at `width`."""
        pairs = [f"{header} {value}" if header else value
                 for header, value in zip(self.headers[self.names:], row[self.names:], strict=True)]
        lines: list[str] = []
        current: list[str] = []
        for pair in pairs:
            if current and len("  " + "  ".join([*current, pair])) > width:
                lines.append("  " + "  ".join(current))
                current = []
            current.append(pair)
        if current:
            lines.append("  " + "  ".join(current))
        return lines
