#!/usr/bin/env bash
# Prints the path of a Python that has selenium (PyPI), to drive Debian's chromium through
# chromium-driver, headless, in the browser tests; installs what is missing: the two
# Debian packages, and selenium (pinned) into a virtual environment in the tools cache.
set -euo pipefail
SELENIUM_VERSION="4.27.1"
here="$(dirname "$0")"
bash "$here/need.sh" chromium:chromium chromedriver:chromium-driver >&2
# A font, so screenshots show text (chromium only recommends one).
if ! ls /usr/share/fonts/truetype/*/*.ttf >/dev/null 2>&1; then
  echo "need-browser: installing fonts-dejavu-core" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends fonts-dejavu-core >&2
fi
exec bash "$here/pip-tool.sh" browser "selenium-${SELENIUM_VERSION}" "selenium==${SELENIUM_VERSION}"
