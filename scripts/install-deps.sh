#!/usr/bin/env bash
# Installs the Debian packages Loom's embedded stack and its README tools need, when
# they are missing: the Postgres and ClickHouse servers `loomd dev` and the tests run
# privately, clickhouse-client and kcat, and nodejs and npm, which run the MCP and mem0
# clients of tests/e2e. With --browser, also chromium, which the console's browser tests
# (tests/console) drive headless; `make test` passes it, `make dev` does not. Works as
# root and through sudo.
#
# Another apt (unattended-upgrades, a second `make deps`) holding the package locks is
# waited for, up to LOOM_APT_LOCK_TIMEOUT seconds (default 600), instead of failing.
set -euo pipefail

packages=(postgresql clickhouse-server clickhouse-client kcat)
if [ "${1:-}" = "--browser" ]; then
  packages+=(chromium)
fi
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

lock_timeout=${LOOM_APT_LOCK_TIMEOUT:-600}
apt_get() {
  # DPkg::Lock::Timeout makes apt wait for dpkg's locks rather than fail at once.
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$lock_timeout" "$@"
}

# apt-get update takes /var/lib/apt/lists/lock, which DPkg::Lock::Timeout does not
# cover (apt 2.6 fails at once): while another apt holds it, try again.
update_lists() {
  local waited=0 out
  while true; do
    if out=$(apt_get update -qq 2>&1); then
      return 0
    fi
    if ! grep -q "Could not get lock" <<<"$out" || [ "$waited" -ge "$lock_timeout" ]; then
      echo "$out" >&2
      return 1
    fi
    if [ "$waited" -eq 0 ]; then
      echo "install-deps: another apt holds the package lists; waiting up to ${lock_timeout}s" >&2
    fi
    sleep 2
    waited=$((waited + 2))
  done
}

echo "install-deps: installing ${missing[*]}"
update_lists
apt_get install -y -qq --no-install-recommends "${missing[@]}"
