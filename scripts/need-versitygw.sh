#!/usr/bin/env bash
# Prints the path of a versitygw binary (the Versity S3 Gateway, a real S3 server the
# object-storage tests run on loopback), built at the pinned version into the tools cache
# when there is none (scripts/go-tool.sh).
set -euo pipefail
exec bash "$(dirname "$0")/go-tool.sh" versitygw github.com/versity/versitygw/cmd/versitygw v1.8.0
