"""A written PNG read back: big enough, and not blank."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def assert_drawn(path: str | Path, min_height: int = 150, min_width: int = 200) -> np.ndarray:
    import matplotlib.image
    image = matplotlib.image.imread(str(path))
    assert image.ndim == 3 and image.shape[0] >= min_height and image.shape[1] >= min_width, image.shape
    pixels = image[..., :3].reshape(-1, 3)
    colors = np.unique((pixels * 255).astype(np.uint8), axis=0)
    assert len(colors) > 8, "the image is (nearly) one color"
    non_white = np.mean(pixels.min(axis=1) < 0.9)
    assert non_white > 0.01, "the image is (nearly) all white"
    return image
