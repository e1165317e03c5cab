#!/usr/bin/env bash
# Installs the wheels of fetch-wheels.sh into TARGET for PYTHON, offline and without
# dependencies; then run kvikio_read.py with PYTHONPATH=TARGET.
# Usage: install-wheels.sh WHEELS TARGET [PYTHON]   (PYTHON: /opt/torch/.venv/bin/python)
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 WHEELS TARGET [PYTHON (default /opt/torch/.venv/bin/python)]" >&2
    exit 2
fi
wheels=$1
target=$2
py=${3:-/opt/torch/.venv/bin/python}
if ! "$py" -V >/dev/null 2>&1; then
    echo "install-wheels: cannot run $py" >&2
    exit 1
fi
tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

files=()
for f in "$wheels"/*.whl; do
    case $(basename "$f") in
    numpy-*)
        # numpy >= 2 already beside torch stays (torch was built with it).
        if "$py" -c 'import numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) < 2)' 2>/dev/null; then
            continue
        fi
        if [[ $(basename "$f") != *"-$tag-"* ]]; then
            echo "install-wheels: $f is not for $tag ($py); fetch the wheels for its version:" \
                "fetch-wheels.sh DIR $("$py" -c 'import sys; print(*sys.version_info[:2], sep=".")')" >&2
            exit 1
        fi
        ;;
    esac
    files+=("$f")
done
if [[ ${#files[@]} -eq 0 ]]; then
    echo "install-wheels: no wheels in $wheels" >&2
    exit 1
fi

mkdir -p "$target"
if "$py" -m pip --version >/dev/null 2>&1; then
    "$py" -m pip install --quiet --no-deps --no-index --target "$target" "${files[@]}"
else
    # No pip: these wheels hold no .data folders, so unpacking them is installing them.
    for f in "${files[@]}"; do
        "$py" -m zipfile -e "$f" "$target"
    done
fi
echo "installed ${#files[@]} wheels into $target; run with PYTHONPATH=$target"
