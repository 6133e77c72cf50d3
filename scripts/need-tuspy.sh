#!/usr/bin/env bash
# Prints the path of a Python that has tuspy (PyPI), the Python TUS client the upload
# tests drive, installing the pinned version into a virtual environment in the tools
# cache when there is none.
set -euo pipefail
TUSPY_VERSION="1.1.0"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
venv="$CACHE/tuspy-${TUSPY_VERSION}"
if [ -x "$venv/bin/python" ] && [ -e "$venv/.installed" ]; then
  echo "$venv/bin/python"; exit 0
fi
command -v python3 >/dev/null || { echo "need-tuspy: python3 is missing" >&2; exit 1; }
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  echo "need-tuspy: installing python3-venv" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
echo "need-tuspy: installing tuspy ${TUSPY_VERSION} from PyPI" >&2
"$venv/bin/pip" install -q "tuspy==${TUSPY_VERSION}" >&2
touch "$venv/.installed"
echo "$venv/bin/python"
