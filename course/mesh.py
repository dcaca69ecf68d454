"""Structured meshes and their node and element numbering."""

from __future__ import annotations

import numpy as np


def line_mesh(n_elem: int, length: float = 1.0) -> np.ndarray:
    """Node coordinates of [0, length] cut into n_elem equal linear elements.

    Node i sits at x_i = i * length / n_elem; element e joins nodes e and e + 1.
    """
    if int(n_elem) != n_elem or n_elem < 1:
        raise ValueError(f"n_elem must be a positive integer, got {n_elem!r}")
    if not length > 0:
        raise ValueError(f"length must be positive, got {length!r}")
    return np.linspace(0.0, float(length), int(n_elem) + 1)
