#!/usr/bin/env bash
# Installs the Debian packages Loom's embedded stack and its README tools need, when
# they are missing: the Postgres and ClickHouse servers `loomd dev` and the tests run
# privately, clickhouse-client and kcat, and nodejs and npm, which run the MCP and mem0
# clients of tests/e2e. Works as root and through sudo.
set -euo pipefail

packages=(postgresql clickhouse-server clickhouse-client kcat)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# node and npm count as present whatever package brought them (a nodejs that bundles
# npm conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
