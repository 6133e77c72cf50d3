#!/usr/bin/env bash
# Fetches tus-js-client's browser bundle from npm into the file manager's assets
# (services/gateway/src/handlers/ui/vendor/), checking it is the bundle reviewed: the
# file manager sends large files with it (docs/uploads.md). Kept in the repository so
# building kubedav needs nothing but cargo; this script is how it got there and how it
# is updated (change VERSION and SHA256 together, after reading the new release).
set -euo pipefail
VERSION="4.3.1"
SHA256="8cbb1b63fccc3bba0ae73ad1deb160ce046c3750851d0c3e94921ae3ef070eb8"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$REPO/services/gateway/src/handlers/ui/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack -q "tus-js-client@$VERSION" >/dev/null && tar xzf "tus-js-client-$VERSION.tgz")
echo "$SHA256  $work/package/dist/tus.min.js" | sha256sum -c --quiet
cp "$work/package/dist/tus.min.js" "$OUT/tus-js-client-$VERSION.min.js"
cp "$work/package/LICENSE" "$OUT/tus-js-client-LICENSE"
echo "tus-js-client $VERSION in $OUT"
