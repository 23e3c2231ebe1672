#!/usr/bin/env bash
# What the test suite needs besides Python packages: Debian's Chromium and its WebDriver, for
# the web chat's browser tests. Installs them only when missing (README's test command runs
# this first, so `.ci/run` does too); a failed install fails the test command.
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends chromium chromium-driver
