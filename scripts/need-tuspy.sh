#!/usr/bin/env bash
# Prints the path of a Python that has tuspy (PyPI), the Python TUS client the upload
# tests drive, installing the pinned version into a virtual environment in the tools
# cache when there is none.
set -euo pipefail
TUSPY_VERSION="1.1.0"
exec bash "$(dirname "$0")/pip-tool.sh" tuspy "tuspy-${TUSPY_VERSION}" "tuspy==${TUSPY_VERSION}"
