#!/usr/bin/env bash
# What the test suite needs besides Python packages: Debian's Chromium and its WebDriver, for
# the web chat's browser tests, and the PostgreSQL server binaries, for the store contract
# and replica tests (they start a throwaway cluster). Installs only what is missing (README's
# test command runs this first, so `.ci/run` does too); a failed install fails the test
# command.
set -euo pipefail

packages=()
if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
    packages+=(chromium chromium-driver)
fi
if ! compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null; then
    packages+=(postgresql)
fi
if [[ ${#packages[@]} -eq 0 ]]; then
    exit 0
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
