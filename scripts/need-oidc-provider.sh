#!/usr/bin/env bash
# Prints the directory of an npm install of panva's oidc-provider (the real OpenID
# provider the identity tests start, services/testkit/idp/idp.mjs), installing the pinned
# version into the tools cache when it is missing. Needs node and npm (Debian's nodejs
# and npm packages, installed when missing).
set -euo pipefail
VERSION="9.13.3"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
dir="$CACHE/oidc-provider-${VERSION}"
if [ -e "$dir/.installed" ]; then
  echo "$dir"; exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "need-oidc-provider: installing nodejs and npm" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >&2
fi
rm -rf "$dir"
mkdir -p "$dir"
echo "need-oidc-provider: installing oidc-provider ${VERSION} from npm" >&2
(cd "$dir" && echo '{"name":"kubedav-idp","private":true,"type":"module"}' > package.json \
  && npm install --no-audit --no-fund --silent "oidc-provider@${VERSION}" >&2)
touch "$dir/.installed"
echo "$dir"
