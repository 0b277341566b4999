"""A kernel's strategy, ``#kiln.config``, as Python holds it.

Why one class: a config passes through kiln.compile's ``configs=``, the autotuner's spaces and records, the
compiler's defaults (its tunable kernels) and a program's manifest. Each is a ``Config``; its JSON object
(``as_json``, ``Config.of(dict)``) is the form the compiler writes into manifests and reads pinned configs in
(Driver/ConfigJson.h), where #kiln.config's own verifier checks it.
"""

import typing

#: The defaults of a config's optional entries, in order: the lowering, the tile group and the contraction's
#: split over a cluster.
DEFAULTS = ("mma_sync", 1, 1)
OPTIONAL = ("lowering", "group", "k_splits")


class Config(typing.NamedTuple):
    """Output tile, warps per block, pipeline stages and the kernel that runs it: "mma_sync" (sm_80 and sm_90a),
    "wgmma" (matmuls and attention on sm_90a) or "host"; for a GPU matmul the order of its tiles' blocks, in
    groups of ``group`` tile rows (1: row-major); for a wgmma matmul the blocks of a thread-block cluster that
    each tile's contraction is split over, ``k_splits`` (1: not split)."""

    tile: tuple
    warps: int
    stages: int
    lowering: str = DEFAULTS[0]
    group: int = DEFAULTS[1]
    k_splits: int = DEFAULTS[2]

    @classmethod
    def of(cls, value):
        """A Config from a Config, a ``(tile, warps, stages[, lowering[, group[, k_splits]]])`` tuple, or the
        manifest's JSON object; ValueError naming the value otherwise."""
        if isinstance(value, cls):
            return value
        try:
            if isinstance(value, dict):
                tile, warps, stages = value["tile"], value["warps"], value["stages"]
                rest = [value.get(key, default) for key, default in zip(OPTIONAL, DEFAULTS)]
            else:
                tile, warps, stages, *rest = value
            if len(rest) > len(OPTIONAL) or isinstance(tile, (str, bytes)):
                raise ValueError
            # The optional entries past those given take their defaults.
            lowering, group, k_splits = [*rest, *DEFAULTS[len(rest):]]
            if any(isinstance(n, bool) or not isinstance(n, int) for n in (group, k_splits)):
                raise ValueError
            return cls(tuple(int(size) for size in tile), int(warps), int(stages), str(lowering), group, k_splits)
        except (KeyError, TypeError, ValueError):
            raise ValueError("a kernel config is (tile, warps, stages[, lowering[, group[, k_splits]]]) or its JSON "
                             f"object, got {value!r}") from None

    def as_json(self):
        """The manifest's JSON object of this config ("group" and "k_splits" only where they are not 1, as the
        compiler writes it)."""
        entry = {"tile": list(self.tile), "warps": self.warps, "stages": self.stages, "lowering": self.lowering}
        if self.group != 1:
            entry["group"] = self.group
        if self.k_splits != 1:
            entry["k_splits"] = self.k_splits
        return entry
