"""The disk cache of compiled GPU programs (KILN_CACHE_DIR).

Why on disk: compiling a GPU program takes from a fraction of a second to seconds, and the same kernels are asked
for again by every process that runs the same model. An entry is a folder named by the SHA-256 of (compiler id,
target, entry, source) holding what the compiler wrote (manifest, PTX, cubin, constants) and, written last,
``checksums.json`` with the SHA-256 of every file. The protocol is the runtime's (``kiln_cache_*``, shared with the
compiler's kernel cache): an entry is built in a private folder and renamed into place in one step, so readers
never see half an entry; when two processes build the same entry, the first rename wins and the other process
uses it. An entry whose checksums do not match (truncated, edited, partly deleted), whose manifest this Kiln
cannot run (``gpu.ManifestError``), or whose path is not a folder (a file, a symlink) is removed and rebuilt. A cache directory that cannot be written (read-only) only costs time: the
program is compiled into a private temporary folder, removed when the process exits, with a ``CacheWarning``.
Beside the programs, ``kernels/`` holds the kernel cache that the compiler itself reads and writes (one folder
per compiled kernel module, through the same protocol; see Driver/KernelCache.h).
"""

import atexit
import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from . import runtime


class CacheWarning(RuntimeWarning):
    """A cache that could not be written (read-only, full): the compile went on without it."""


def directory():
    """KILN_CACHE_DIR, or kiln/ under XDG_CACHE_HOME (default ~/.cache)."""
    if os.environ.get("KILN_CACHE_DIR"):
        return Path(os.environ["KILN_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kiln"


def kernel_directory():
    """The kernel cache of this build of the compiler (kernels/<compiler id> in the cache directory): compiled
    kernel modules that any program with the same kernel reuses, a matmul of other sizes included. None for a
    build that does not know its id: its kernels could be taken for another build's."""
    build = compiler_id()
    if build == "unknown-build":
        return None
    return directory() / "kernels" / build


def compiler_id():
    """The build of the compiler the entries come from (written next to the package at build time)."""
    try:
        from ._build_info import COMPILER_ID
    except ImportError:
        return "unknown-build"
    return COMPILER_ID


def key(source, target, entry):
    text = "\0".join((compiler_id(), target, entry or "", source))
    return hashlib.sha256(text.encode()).hexdigest()


def discard(folder):
    """Removes what is at an entry's path: a folder with what it holds, or a file or symlink (not its target)."""
    runtime.cache_discard(folder)


def lookup(entry_key):
    """The folder of a valid entry, or None (anything else at its path is removed)."""
    root = directory()
    return root / entry_key if runtime.cache_lookup(root, entry_key) else None


_UNCACHED = []


def _remove_uncached():
    for folder in _UNCACHED:
        shutil.rmtree(folder, ignore_errors=True)


def _build_uncached(build, reason):
    """Builds a program into a private temporary folder, kept until the process exits, after a CacheWarning."""
    warnings.warn(f"the kiln cache {directory()} cannot be written ({reason}): compiling without it",
                  CacheWarning, stacklevel=5)
    folder = Path(tempfile.mkdtemp(prefix="kiln-uncached-"))
    if not _UNCACHED:
        atexit.register(_remove_uncached)
    _UNCACHED.append(folder)
    try:
        build(str(folder))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def store(entry_key, build):
    """Builds an entry with ``build(folder)`` in a private folder, seals it with checksums and puts it in place;
    returns the entry's folder (another process's, when it got there first), or, when the cache cannot be
    written, a temporary folder outside it."""
    root = directory()
    try:
        staging = runtime.cache_stage(root, entry_key)
    except OSError as error:
        return _build_uncached(build, str(error).rsplit(": ", 1)[-1])
    try:
        build(staging)
        runtime.cache_publish(root, entry_key, staging)
        return root / entry_key
    finally:
        # Ctrl-C during a compile is raised at the first Python call after the extension returns, which is often
        # this removal: a KeyboardInterrupt inside rmtree left half a staging folder in the cache (for the hour
        # until a sweep). The removal is finished first and the interrupt raised after it; the retry loop sits
        # in this frame because the interrupt may also fire on entry to rmtree.
        interrupt = None
        while True:
            try:
                shutil.rmtree(staging, ignore_errors=True)
                break
            except KeyboardInterrupt as error:
                interrupt = error
        if interrupt is not None:
            raise interrupt
