#!/usr/bin/env bash
# Prints the path of a Python that has webdav4 with its fsspec interface (PyPI), the
# Python WebDAV client the client tests drive, installing the pinned versions into a
# virtual environment in the tools cache when there is none.
set -euo pipefail
WEBDAV4_VERSION="0.11.0"
FSSPEC_VERSION="2026.9.0"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
venv="$CACHE/webdav4-${WEBDAV4_VERSION}"
if [ -x "$venv/bin/python" ] && [ -e "$venv/.installed" ]; then
  echo "$venv/bin/python"; exit 0
fi
command -v python3 >/dev/null || { echo "need-webdav4: python3 is missing" >&2; exit 1; }
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  echo "need-webdav4: installing python3-venv" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
echo "need-webdav4: installing webdav4 ${WEBDAV4_VERSION} and fsspec ${FSSPEC_VERSION} from PyPI" >&2
"$venv/bin/pip" install -q "webdav4==${WEBDAV4_VERSION}" "fsspec==${FSSPEC_VERSION}" >&2
touch "$venv/.installed"
echo "$venv/bin/python"
