#!/usr/bin/env bash
# Prints the path of a Python that has selenium (PyPI), to drive Debian's chromium through
# chromium-driver, headless, in the browser tests; installs what is missing: the two
# Debian packages, and selenium (pinned) into a virtual environment in the tools cache.
set -euo pipefail
SELENIUM_VERSION="4.27.1"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
here="$(dirname "$0")"
bash "$here/need.sh" chromium:chromium chromedriver:chromium-driver >&2
# A font, so screenshots show text (chromium only recommends one).
if ! ls /usr/share/fonts/truetype/*/*.ttf >/dev/null 2>&1; then
  echo "need-browser: installing fonts-dejavu-core" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends fonts-dejavu-core >&2
fi
venv="$CACHE/selenium-${SELENIUM_VERSION}"
if [ -x "$venv/bin/python" ] && [ -e "$venv/.installed" ]; then
  echo "$venv/bin/python"; exit 0
fi
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  echo "need-browser: installing python3-venv" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
echo "need-browser: installing selenium ${SELENIUM_VERSION} from PyPI" >&2
"$venv/bin/pip" install -q "selenium==${SELENIUM_VERSION}" >&2
touch "$venv/.installed"
echo "$venv/bin/python"
