#!/usr/bin/env bash
# What `make test` needs from the system beyond Python: PostgreSQL and Redis (started by the
# suite itself), Chromium (the dashboard's browser test), nginx (the rolling-upgrade test)
# WordNet's nouns (memory recall), PgBouncer, pg_auto_failover and faketime (the fleet), a
# small CJK font (the browser tests' screenshots of the
# Chinese dashboard show characters, not boxes) and wrk (make bench's HTTP load generator).
# Installed with apt-get where this is possible (root, Debian or Ubuntu); otherwise one line
# says what to install (those tests then skip).
set -u
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need+=(nginx)
[ -f /usr/share/wordnet/index.noun ] || need+=(wordnet-base)
fc-list :lang=zh 2>/dev/null | grep -q . || need+=(fonts-wqy-microhei)
command -v wrk >/dev/null 2>&1 || need+=(wrk)  # the load generator of bench/http_limit.py
# the fleet: PgBouncer in transaction mode (the conformance suite through it), and for
# make torture a replicated PostgreSQL that fails over alone, skewed clocks, namespaces
[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || need+=(pgbouncer)
command -v pg_autoctl >/dev/null 2>&1 || need+=(postgresql-15-auto-failover)
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || need+=(faketime)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
((${#need[@]})) || exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need[*]} (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null && exit 0
    echo "apt-get could not install ${need[*]}" >&2
fi
echo "make test: for the whole suite install ${need[*]} (apt-get install ${need[*]}); the tests that need them skip without"
