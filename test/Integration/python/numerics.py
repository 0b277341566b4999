"""Helpers shared by the Python API tests: the kiln package from the build, fresh seeds, and the error check.

``kiln`` is imported from ``$KILN_BUILD_DIR/python`` (default /work/main/build/python), where the build assembles
the package, or else from an installed one (``pip install .``); a missing package fails the run rather than
skipping it. Errors are relative in the max norm (max |actual - reference| over max |reference|) against a
float64 reference.
"""

import os
import pathlib
import secrets
import sys

import numpy as np

BUILD_DIR = pathlib.Path(os.environ.get("KILN_BUILD_DIR", "/work/main/build"))
sys.path.insert(0, str(BUILD_DIR / "python"))
import kiln  # noqa: E402,F401

#: Tolerance of the f32 checks.
TOLERANCE = 1e-4


def fresh_rng():
    """A generator seeded from the OS, and its seed (recorded with every error)."""
    seed = secrets.randbits(64)
    return np.random.default_rng(seed), seed


def check(record_error, family, actual, reference, seed, tolerance=TOLERANCE):
    """Asserts the relative error of ``actual`` against ``reference`` and records it under ``family``."""
    actual = np.asarray(actual, dtype=np.float64)
    assert actual.shape == reference.shape, f"shape {actual.shape}, expected {reference.shape}"
    error = float(np.max(np.abs(actual - reference)) / max(np.max(np.abs(reference)), 1e-30))
    record_error(family, error, tolerance, seed)
    assert error < tolerance, f"{family}: relative error {error:.3e} (seed {seed})"
