#!/usr/bin/env bash
# Kiln set-up: install the C++ toolchain and the Python side when they are missing.
#
# Why: `make demo` and `make test` must work on a fresh Debian/Ubuntu machine with nothing but the package
# registries. This script checks first and installs only what is absent, so a second run takes a second. On a
# system without apt-get it installs nothing and lists exactly what is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
llvm_version=22
python="${PYTHON:-python3}"

# Debian package -> a file whose presence proves it is installed.
declare -A debian_packages=(
  [llvm-${llvm_version}-dev]=/usr/lib/llvm-${llvm_version}/lib/cmake/llvm/LLVMConfig.cmake
  [libmlir-${llvm_version}-dev]=/usr/lib/llvm-${llvm_version}/lib/cmake/mlir/MLIRConfig.cmake
  [mlir-${llvm_version}-tools]=/usr/lib/llvm-${llvm_version}/bin/mlir-tblgen
  [llvm-${llvm_version}-tools]=/usr/lib/llvm-${llvm_version}/bin/FileCheck
  [ninja-build]=/usr/bin/ninja
  [ccache]=/usr/bin/ccache
  [cmake]=/usr/bin/cmake
  [g++]=/usr/bin/g++
  [make]=/usr/bin/make
  [zlib1g-dev]=/usr/include/zlib.h
  [libzstd-dev]=/usr/include/zstd.h
  # links the wheel's compiler (scripts/link_standalone_compiler.sh): GNU ld rejects Debian's non-PIC libzstd.a there
  [lld]=/usr/bin/ld.lld
)

missing=()
for pkg in "${!debian_packages[@]}"; do
  [[ -e "${debian_packages[$pkg]}" ]] || missing+=("$pkg")
done

# Installs Debian packages with apt-get (through sudo when not root), or lists them and fails without apt-get.
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "kiln setup: this system has no apt-get; install these Debian/Ubuntu packages (or their equivalents):" >&2
    printf '  %s\n' "$@" >&2
    exit 1
  fi
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "kiln setup: need root or sudo to install: $*" >&2; exit 1; }
    sudo=sudo
  fi
  echo "kiln setup: installing $*"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ((${#missing[@]})); then
  apt_install "${missing[@]}"
fi

if ! command -v "$python" >/dev/null 2>&1; then
  echo "kiln setup: no '$python' on PATH; install Python 3.9 or newer (or set PYTHON=...)" >&2
  exit 1
fi

# The Python extension (python/src) needs the interpreter's headers: python3-dev for Debian's own Python.
python_include="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [[ ! -e "$python_include/Python.h" ]]; then
  if [[ "$python_include" == /usr/include/* ]]; then
    apt_install python3-dev
  else
    echo "kiln setup: $python has no development headers (no Python.h in $python_include); install them" >&2
    exit 1
  fi
fi

# Python packages: install from the pinned list only when an import or a version check fails.
if ! "$python" "$here/scripts/check_requirements.py" "$here/requirements.txt" >/dev/null 2>&1; then
  echo "kiln setup: installing Python packages from requirements.txt"
  "$python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
  "$python" "$here/scripts/check_requirements.py" "$here/requirements.txt"
fi
