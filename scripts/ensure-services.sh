#!/usr/bin/env bash
# Make sure the servers the tests use are running: Redis at 127.0.0.1:6379 and
# PostgreSQL at 127.0.0.1:5432 (trust auth for user postgres). Starts what is
# down; installs what is missing (Debian), or falls back to the embedded Valkey.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { for _ in $(seq 1 100); do port_open "$1" && return 0; sleep 0.1; done; return 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! port_open 6379; then
  if command -v redis-server >/dev/null; then
    echo "ensure-services: starting redis-server on 6379"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  else
    echo "ensure-services: no redis-server; starting the embedded Valkey on 6379"
    "$("$VENV/bin/python" -c 'from common.embedded_redis import valkey_binary; print(valkey_binary())')" \
      --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp
  fi
  wait_port 6379 || { echo "ensure-services: Redis did not start" >&2; exit 1; }
fi

if ! port_open 5432; then
  if ! command -v pg_ctlcluster >/dev/null; then
    echo "ensure-services: installing PostgreSQL from Debian's packages"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  version=$(ls /etc/postgresql | sort -n | tail -1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  if ! grep -q "wg-tests trust" "$hba"; then
    # Tests connect as postgres over TCP without a password (trust, loopback only).
    as_root sed -i "1i host all all 127.0.0.1/32 trust # wg-tests trust" "$hba"
  fi
  echo "ensure-services: starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_port 5432 || { echo "ensure-services: PostgreSQL did not start" >&2; exit 1; }
fi
if [ ! -x /usr/bin/chromium ]; then
  # The browser tests drive Debian's Chromium through Playwright (no browser download).
  echo "ensure-services: installing Chromium from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v promtool >/dev/null || ! [ -x /usr/sbin/nginx ]; then
  # The production stack's tests check its configs with the real tools: promtool (Debian's
  # prometheus package) and nginx. Neither daemon is wanted here: a policy-rc.d that denies
  # starting services (as Docker images have) stays in place during the install.
  echo "ensure-services: installing promtool and nginx from Debian's packages"
  added_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    prometheus nginx >/dev/null
  if [ -n "$added_policy" ]; then as_root rm -f /usr/sbin/policy-rc.d; fi
fi
echo "ensure-services: Redis, PostgreSQL, Chromium, promtool and nginx are ready"
