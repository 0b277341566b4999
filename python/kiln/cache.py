"""The disk cache of compiled GPU programs (KILN_CACHE_DIR).

Why on disk: compiling a GPU program takes from a fraction of a second to seconds, and the same kernels are asked
for again by every process that runs the same model. An entry is a folder named by the SHA-256 of (compiler id,
target, entry, source) holding what the compiler wrote (manifest, PTX, cubin, constants) and, written last,
``checksums.json`` with the SHA-256 of every file. An entry is built in a private temporary folder and renamed
into place in one step, so readers never see half an entry; when two processes build the same entry, the first
rename wins and the other process uses it. An entry whose checksums do not match (truncated, edited, partly
deleted), whose manifest this Kiln cannot run (``gpu.ManifestError``), or whose path is not a folder (a file, a
symlink) is removed and rebuilt. A cache directory that cannot be written (read-only) only costs time: the
program is compiled into a private temporary folder, removed when the process exits, with a ``CacheWarning``.
Beside the programs, ``kernels/`` holds the kernel cache that the compiler itself reads and writes (one folder
per compiled kernel module, the same guarantees; see Driver/KernelCache.h).
"""

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

_CHECKSUMS = "checksums.json"


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
    folder = directory() / "kernels" / build
    _sweep_abandoned(folder)
    return folder


_SWEPT = set()


def _sweep_abandoned(root):
    """Removes, once per process and folder, the private folders (names starting with a dot) that killed
    processes left in ``root`` over an hour ago: a live process renames or removes its own within seconds."""
    if root in _SWEPT:
        return
    _SWEPT.add(root)
    cutoff = time.time() - 3600
    try:
        for path in root.iterdir():
            if path.name.startswith(".") and path.is_dir() and path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)
    except OSError:  # no folder yet, or one that cannot be read: nothing to sweep
        pass


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


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _valid(folder):
    try:
        recorded = json.loads((folder / _CHECKSUMS).read_text())
        files = sorted(p.name for p in folder.iterdir() if p.name != _CHECKSUMS)
        return sorted(recorded) == files and all(_digest(folder / name) == digest for name, digest in recorded.items())
    except (OSError, ValueError):
        return False


def _entry(folder):
    """Whether ``folder`` is a valid entry: a real folder (a symlink never is one, wherever it points) whose
    files match their checksums."""
    return not folder.is_symlink() and folder.is_dir() and _valid(folder)


def discard(folder):
    """Removes what is at an entry's path: a folder with what it holds, or a file or symlink (not its target)."""
    if folder.is_symlink() or not folder.is_dir():
        try:
            folder.unlink()
        except OSError:  # gone already, or a read-only cache: it is not taken, only not removed
            pass
    else:
        shutil.rmtree(folder, ignore_errors=True)


def lookup(entry_key):
    """The folder of a valid entry, or None (anything else at its path is removed)."""
    folder = directory() / entry_key
    if not os.path.lexists(folder):
        return None
    if _entry(folder):
        return folder
    discard(folder)
    return None


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
    """Builds an entry with ``build(folder)`` in a private folder, seals it with checksums and renames it into
    place; returns the entry's folder (another process's, when it got there first), or, when the cache cannot be
    written, a temporary folder outside it."""
    root = directory()
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{entry_key[:16]}.", dir=root))
    except OSError as error:
        return _build_uncached(build, error.strerror or error)
    _sweep_abandoned(root)
    try:
        build(str(staging))
        checksums = {p.name: _digest(p) for p in sorted(staging.iterdir())}
        seal = staging / _CHECKSUMS
        try:
            seal.write_text(json.dumps(checksums, indent=1))
        except OSError as error:  # a full disk fails the write or the close, whose error names no file
            raise OSError(error.errno, f"cannot write {seal}: {error.strerror}") from None
        final = root / entry_key
        try:
            os.rename(staging, final)
        except OSError:
            if not _entry(final):  # a corrupt leftover, a file or a symlink: replace it
                discard(final)
                try:
                    os.rename(staging, final)
                except OSError:
                    pass
            if not _entry(final):
                raise RuntimeError(f"the cache entry {final} could not be written") from None
        return final
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
