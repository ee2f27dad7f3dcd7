#!/bin/sh
# The build steps of deploy/Dockerfile's build stage, as one script, so that the
# tests (tests/deploy/test_image_build.py) run exactly what the image runs: no
# container daemon can run where gitreg is developed and tested.
#
#   sh deploy/build-image.sh SRC PREFIX
#
# SRC holds the files the Dockerfile copies (pyproject.toml, README.md, gitreg/,
# deploy/); PREFIX becomes a self-contained virtualenv with gitreg, the
# entrypoint (gitreg-entrypoint) and the health check (gitreg-healthcheck).
# PYTHON names the interpreter (default python3, the base image's).
set -eu

if [ "$#" -ne 2 ]; then
    echo "usage: $0 SRC PREFIX" >&2
    exit 2
fi
src=$1
prefix=$2
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A wheel first, then an install of that wheel: the image gets what a release
# would ship, not an editable checkout, and no build tools reach the runtime stage.
"$python" -m pip wheel --no-deps --wheel-dir "$work/dist" "$src"
"$python" -m venv "$prefix"
"$prefix/bin/python" -m pip install --no-cache-dir "$work"/dist/gitreg-*.whl

# The root filesystem is read-only at run time, so the entrypoint and health
# check are installed here, with the virtualenv's own interpreter.
install -m 0755 "$src/deploy/docker-entrypoint.sh" "$prefix/bin/gitreg-entrypoint"
{
    printf '#!%s/bin/python\n' "$prefix"
    cat "$src/deploy/healthcheck.py"
} >"$prefix/bin/gitreg-healthcheck"
chmod 0755 "$prefix/bin/gitreg-healthcheck"

# A broken install fails the build, not the first start.
"$prefix/bin/gitreg" --version
