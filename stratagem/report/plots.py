"""matplotlib, imported on first use with the Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import matplotlib.colors  # noqa: F401 - used as plt.matplotlib.colors
    import matplotlib.patches  # noqa: F401
    return plt


def save(figure, path: str | Path) -> Path:
    """Write a figure as PNG (parents created) and release it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot().close(figure)
    return path
