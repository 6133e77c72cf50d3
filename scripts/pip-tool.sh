#!/usr/bin/env bash
# Prints the path of a Python that has the pinned PyPI packages SPEC..., installing them
# into the virtual environment VENV of the tools cache when it is not there yet (with
# python3-venv when the system lacks it); what scripts/need-webdav4.sh,
# need-tuspy.sh and need-browser.sh share.
#
#   pip-tool.sh NAME VENV SPEC...     e.g. pip-tool.sh tuspy tuspy-1.1.0 tuspy==1.1.0
set -euo pipefail
name="$1" venv_name="$2"
shift 2
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
venv="$CACHE/$venv_name"
if [ -x "$venv/bin/python" ] && [ -e "$venv/.installed" ]; then
  echo "$venv/bin/python"; exit 0
fi
command -v python3 >/dev/null || { echo "need-$name: python3 is missing" >&2; exit 1; }
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  echo "need-$name: installing python3-venv" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
echo "need-$name: installing $* from PyPI" >&2
"$venv/bin/pip" install -q "$@" >&2
touch "$venv/.installed"
echo "$venv/bin/python"
