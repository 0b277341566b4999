"""The runtime's cache protocol (kiln_cache_*), which the program cache and the kernel cache both use.

Why here: test_cache.py drives both caches end to end; these tests pin the protocol itself: a sealed entry is
found, any change to it (an edited, extra or missing file) makes it disappear instead, a path that is a file or a
symlink is removed without touching what it points at, the first entry published wins, and a root that cannot
be written is an OSError naming it.
"""

import hashlib
import json
import os

import pytest

from numerics import kiln  # noqa: F401 (puts the built package on the path)
from kiln import runtime


def publish(root, key, files):
    staging = runtime.cache_stage(root, key)
    for name, data in files.items():
        with open(os.path.join(staging, name), "wb") as out:
            out.write(data)
    runtime.cache_publish(root, key, staging)
    assert not os.path.exists(staging)
    return root / key


def test_a_sealed_entry_is_found_with_every_file_checksummed(tmp_path):
    files = {"a.bin": os.urandom(100_000), "empty": b"", "b.txt": b"x" * 64}
    entry = publish(tmp_path, "k" * 64, files)
    sums = json.loads((entry / "checksums.json").read_text())
    assert sums == {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    assert runtime.cache_lookup(tmp_path, "k" * 64)
    assert not runtime.cache_lookup(tmp_path, "missing")


@pytest.mark.parametrize("damage", ["edit", "extra file", "missing file", "no checksums"])
def test_a_changed_entry_is_removed(tmp_path, damage):
    entry = publish(tmp_path, "key", {"a": b"one", "b": b"two"})
    if damage == "edit":
        (entry / "a").write_bytes(b"One")
    elif damage == "extra file":
        (entry / "c").write_bytes(b"")
    elif damage == "missing file":
        (entry / "b").unlink()
    else:
        (entry / "checksums.json").unlink()
    assert not runtime.cache_lookup(tmp_path, "key")
    assert not os.path.lexists(entry) and os.listdir(tmp_path) == []


def test_a_file_or_symlink_at_an_entry_path_is_removed_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("mine")
    root = tmp_path / "cache"
    root.mkdir()
    (root / "linked").symlink_to(target)
    (root / "file").write_text("not an entry")
    assert not runtime.cache_lookup(root, "linked") and not runtime.cache_lookup(root, "file")
    assert os.listdir(root) == [] and (target / "keep").read_text() == "mine"


def test_the_first_entry_published_wins(tmp_path):
    first = runtime.cache_stage(tmp_path, "key")
    second = runtime.cache_stage(tmp_path, "key")
    for folder, text in ((first, b"first"), (second, b"second")):
        with open(os.path.join(folder, "f"), "wb") as out:
            out.write(text)
    runtime.cache_publish(tmp_path, "key", first)
    runtime.cache_publish(tmp_path, "key", second)
    assert (tmp_path / "key" / "f").read_bytes() == b"first"
    assert sorted(os.listdir(tmp_path)) == ["key"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_root_that_cannot_be_written_is_named(tmp_path):
    root = tmp_path / "read_only"
    root.mkdir()
    root.chmod(0o555)
    try:
        with pytest.raises(OSError, match=f"cannot create a folder in {root}: Permission denied"):
            runtime.cache_stage(root, "key")
    finally:
        root.chmod(0o755)


def test_a_root_under_a_file_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=f"cannot create {tmp_path / 'file' / 'cache'}: Not a directory"):
        runtime.cache_stage(tmp_path / "file" / "cache", "key")
