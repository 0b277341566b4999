"""A kernel's strategy, ``#kiln.config``, as Python holds it.

Why one class: a config passes through kiln.compile's ``configs=``, the autotuner's spaces and records, the
compiler's defaults (its tunable kernels) and a program's manifest. Each is a ``Config``; its JSON object
(``as_json``, ``Config.of(dict)``) is the form the compiler writes into manifests and reads pinned configs in
(Driver/ConfigJson.h), where #kiln.config's own verifier checks it.
"""

import typing


class Config(typing.NamedTuple):
    """Output tile, warps per block, pipeline stages and the kernel that runs it: "mma_sync" (sm_80 and sm_90a),
    "wgmma" (matmuls and attention on sm_90a) or "host"."""

    tile: tuple
    warps: int
    stages: int
    lowering: str = "mma_sync"

    @classmethod
    def of(cls, value):
        """A Config from a Config, a ``(tile, warps, stages[, lowering])`` tuple, or the manifest's JSON object;
        ValueError naming the value otherwise."""
        if isinstance(value, cls):
            return value
        try:
            if isinstance(value, dict):
                tile, warps, stages = value["tile"], value["warps"], value["stages"]
                rest = [value["lowering"]] if "lowering" in value else []
            else:
                tile, warps, stages, *rest = value
            if len(rest) > 1 or isinstance(tile, (str, bytes)):
                raise ValueError
            return cls(tuple(int(size) for size in tile), int(warps), int(stages), str(rest[0]) if rest else "mma_sync")
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"a kernel config is (tile, warps, stages[, lowering]) or its JSON object, got {value!r}") \
                from None

    def as_json(self):
        """The manifest's JSON object of this config."""
        return {"tile": list(self.tile), "warps": self.warps, "stages": self.stages, "lowering": self.lowering}
