#!/bin/sh
# The image's entrypoint: `gitreg-entrypoint gitreg serve` (deploy/Dockerfile).
#
# Secrets come as files (compose secrets, Kubernetes Secret volumes) rather than
# environment values, which `docker inspect` and the process table show. gitreg
# reads GITREG_SECRET_KEY_FILE and `file:` webhook secrets itself; libpq and the
# S3 client read only variables, so for each NAME below a NAME_FILE is read
# into NAME here, just before gitreg starts.
set -eu

for name in PGPASSWORD AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN GITREG_DATABASE_URL; do
    eval "file=\${${name}_FILE:-}"
    if [ -n "$file" ]; then
        if [ ! -r "$file" ]; then
            echo "gitreg-entrypoint: ${name}_FILE=$file is not a readable file" >&2
            exit 1
        fi
        # $(...) drops the trailing newline that editors and `echo >` leave.
        value=$(cat "$file")
        export "$name=$value"
        unset "${name}_FILE"
    fi
done

# The root filesystem is read-only: temporary files go to the data volume.
data_dir=${GITREG_DATA_DIR:-gitreg-data}
if [ -z "${TMPDIR:-}" ]; then
    TMPDIR=$data_dir/tmp
    export TMPDIR
fi
(umask 077 && mkdir -p "$TMPDIR")

exec "$@"
