"""The ONNX importer under mutation (onnx_fuzz.py): a bounded run in `make test`, a fresh seed each time.

Every mutated example block either imports into IR that kiln-opt parses and verifies, or is refused with a
FrontendError; any other exception (an IndexError from an op rule, a KeyError on an unknown dtype) is a finding,
printed with the draw seed that replays it (`onnx_fuzz.replay(seed)`). Longer runs: `scripts/fuzz.sh SECONDS onnx`.
"""
import os
import random
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import onnx_fuzz  # noqa: E402

DRAWS = int(os.environ.get("KILN_ONNX_FUZZ_DRAWS", "1000"))


def test_mutated_models_import_or_fail_cleanly():
    seed = random.randrange(2 ** 63)
    kiln_opt = Path(os.environ.get("KILN_BUILD_DIR", "build")) / "bin" / "kiln-opt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant folding of 1 / 0 and the like, as numpy does
        count, imported, refused, findings = onnx_fuzz.run(draws=DRAWS, seed=seed,
                                                           kiln_opt=kiln_opt if kiln_opt.exists() else None)
    print(f"onnx fuzz seed {seed}: {count} models, {imported} imported, {refused} refused")
    assert count == DRAWS and imported + refused + len(findings) == count
    assert imported > 0 and refused > 0, "the mutations should both keep and break models"
    assert not findings, "\n".join(f"draw seed {s}: {'; '.join(e)}\n{t}" for s, e, t in findings[:5])


def test_replay_gives_the_same_model():
    seed = random.randrange(2 ** 63)
    first, edits = onnx_fuzz.replay(seed)
    second, again = onnx_fuzz.replay(seed)
    assert edits == again
    as_bytes = (lambda m: m if isinstance(m, bytes) else m.SerializeToString())  # noqa: E731
    assert as_bytes(first) == as_bytes(second)
