"""Kiln set-up helper: exit 0 when every pinned requirement is installed at its pinned version.

Why: scripts/setup.sh must be quick when everything is present; asking importlib.metadata is far faster than
letting pip resolve the whole file on every `make test`.
"""
import sys
from importlib import metadata


def main(path: str) -> int:
    missing = []
    with open(path) as requirements:
        for line in requirements:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, _, version = line.partition("==")
            try:
                installed = metadata.version(name)
            except metadata.PackageNotFoundError:
                missing.append(f"{name} (not installed)")
                continue
            if version and installed != version:
                missing.append(f"{name} ({installed} installed, {version} pinned)")
    for entry in missing:
        print(f"missing: {entry}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
