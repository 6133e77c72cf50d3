#!/usr/bin/env bash
# Prints the path of a Python that has webdav4 with its fsspec interface (PyPI), the
# Python WebDAV client the client tests drive, installing the pinned versions into a
# virtual environment in the tools cache when there is none.
set -euo pipefail
WEBDAV4_VERSION="0.11.0"
FSSPEC_VERSION="2026.9.0"
exec bash "$(dirname "$0")/pip-tool.sh" webdav4 "webdav4-${WEBDAV4_VERSION}" \
  "webdav4==${WEBDAV4_VERSION}" "fsspec==${FSSPEC_VERSION}"
