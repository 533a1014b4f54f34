#!/bin/sh
# Starts one member of the event log's Redis: a data server (`redis-ha.sh server`) or a Sentinel
# (`redis-ha.sh sentinel`). The same script runs in deploy/kubernetes (redis.yaml), in compose.yaml
# and in its scripted twin, so the three start the same topology: two data servers (a primary and a
# replica, both with AOF `everysec`) watched by three Sentinels that promote the replica when the
# primary is gone (docs/operations.md, "The event log's Redis").
#
# Who is the primary is asked, never assumed: first of the Sentinels (after a failover the primary is
# whichever they promoted), then of the data servers themselves (`ROLE`), and only when nothing
# answers (the very first start) is it the first server of REDIS_SERVERS. A data server that is not
# the primary starts as its replica; a Sentinel starts watching it.
#
# Settings (environment), the facade's own names where they mean the same:
#   REDIS_ANNOUNCE         host:port this member is reached at by the others (a stable name: a pod's
#                          DNS name under its headless Service, a compose service name)
#   REDIS_SERVERS          host:port of every data server, the first one the primary at first start
#   REDIS_SENTINELS        host:port of every Sentinel
#   REDIS_SENTINEL_MASTER  the name the Sentinels give the primary (default platform)
#   REDIS_PASSWORD         the data servers' password (optional): required of clients and replicas
#   REDIS_SENTINEL_PASSWORD  the Sentinels' own password (optional)
#   REDIS_BIND             the addresses to listen on (default 0.0.0.0)
#   REDIS_DATA_DIR         where the AOF (server) or the rewritten configuration (sentinel) lives
#                          (default /data)
#   REDIS_SENTINEL_QUORUM  Sentinels that must agree the primary is down (default 2)
#   REDIS_SENTINEL_DOWN_AFTER_MS  silence before a Sentinel calls the primary down (default 5000)
#   REDIS_SENTINEL_FAILOVER_TIMEOUT_MS  (default 60000)
# Passwords go into a configuration file of mode 600 and to redis-cli through REDISCLI_AUTH, never
# onto a command line another process could read.
set -eu

role="${1:-}"
: "${REDIS_ANNOUNCE:?REDIS_ANNOUNCE (host:port of this member) is required}"
: "${REDIS_SERVERS:?REDIS_SERVERS (host:port of every data server) is required}"
: "${REDIS_SENTINELS:?REDIS_SENTINELS (host:port of every Sentinel) is required}"
master="${REDIS_SENTINEL_MASTER:-platform}"
data="${REDIS_DATA_DIR:-/data}"
bind="${REDIS_BIND:-0.0.0.0}"

# A password goes into a configuration file between double quotes: one that could end the quotes or
# the line is refused rather than written half.
newline='
'
for password in "${REDIS_PASSWORD:-}" "${REDIS_SENTINEL_PASSWORD:-}"; do
  case "$password" in *'"'* | *'\'* | *"$newline"*)
    printf 'redis-ha: a password may not hold a double quote, a backslash or a line break\n' >&2
    exit 64
    ;;
  esac
done

host_of() { printf '%s' "${1%:*}"; }
port_of() { printf '%s' "${1##*:}"; }
members() { printf '%s' "$1" | tr ',' ' '; }
say() { printf 'redis-ha: %s\n' "$*" >&2; }

# One redis-cli command to host:port with a password (or none), at most 3 s; its output, errors
# included (redis-cli prints them and exits 0 when not on a terminal).
ask() {
  member="$1" password="$2"
  shift 2
  REDISCLI_AUTH="$password" timeout 3 redis-cli --no-auth-warning -h "$(host_of "$member")" \
    -p "$(port_of "$member")" "$@" 2>/dev/null || true
}

# The primary as host:port: the Sentinels' answer, else the data server that says it is a primary,
# else the first data server.
current_primary() {
  for sentinel in $(members "$REDIS_SENTINELS"); do
    [ "$sentinel" = "$REDIS_ANNOUNCE" ] && continue
    answer="$(ask "$sentinel" "${REDIS_SENTINEL_PASSWORD:-}" SENTINEL get-master-addr-by-name "$master")"
    host="$(printf '%s\n' "$answer" | sed -n 1p)"
    port="$(printf '%s\n' "$answer" | sed -n 2p)"
    # Two lines, a name and a port: anything else is no answer (an error, a Sentinel not watching yet).
    case "$port" in '' | *[!0-9]*) continue ;; esac
    case "$host" in '' | *' '*) continue ;; esac
    printf '%s:%s' "$host" "$port"
    return
  done
  for server in $(members "$REDIS_SERVERS"); do
    [ "$server" = "$REDIS_ANNOUNCE" ] && continue
    if [ "$(ask "$server" "${REDIS_PASSWORD:-}" ROLE | sed -n 1p)" = master ]; then
      printf '%s' "$server"
      return
    fi
  done
  printf '%s' "${REDIS_SERVERS%%,*}"
}

start_server() {
  mkdir -p "$data"
  conf="$data/redis-ha-server.conf"
  umask 077
  {
    printf 'port %s\nbind %s\ndir %s\n' "$(port_of "$REDIS_ANNOUNCE")" "$bind" "$data"
    # Every write appended and fsynced once a second: a restart replays the log from the file.
    printf 'appendonly yes\nappendfsync everysec\nsave ""\n'
    # A replica's first sync starts at once, not after the default 5 s wait for more replicas to
    # join it (there is one): until it ends, no write is on two servers.
    printf 'repl-diskless-sync-delay 0\n'
    # The name the others know it by, not the address it happens to have (a pod's changes).
    printf 'replica-announce-ip %s\nreplica-announce-port %s\n' "$(host_of "$REDIS_ANNOUNCE")" \
      "$(port_of "$REDIS_ANNOUNCE")"
    if [ -n "${REDIS_PASSWORD:-}" ]; then
      printf 'requirepass "%s"\nmasterauth "%s"\n' "$REDIS_PASSWORD" "$REDIS_PASSWORD"
    else
      # No password: the network (a NetworkPolicy, compose's network) is what keeps others out.
      printf 'protected-mode no\n'
    fi
  } >"$conf"
  primary="$(current_primary)"
  if [ "$primary" = "$REDIS_ANNOUNCE" ]; then
    say "server $REDIS_ANNOUNCE starts as the primary"
    exec redis-server "$conf"
  fi
  say "server $REDIS_ANNOUNCE starts as a replica of $primary"
  exec redis-server "$conf" --replicaof "$(host_of "$primary")" "$(port_of "$primary")"
}

start_sentinel() {
  mkdir -p "$data"
  conf="$data/sentinel.conf"
  umask 077
  primary="$(current_primary)"
  # The same id at every start (derived from the stable name): a restarted Sentinel is not counted
  # as one more, which would raise the majority a failover needs.
  id="$(printf '%s' "$REDIS_ANNOUNCE" | sha1sum | cut -c1-40)"
  {
    printf 'port %s\nbind %s\ndir %s\n' "$(port_of "$REDIS_ANNOUNCE")" "$bind" "$data"
    printf 'sentinel myid %s\n' "$id"
    printf 'sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n'
    printf 'sentinel announce-ip %s\nsentinel announce-port %s\n' "$(host_of "$REDIS_ANNOUNCE")" \
      "$(port_of "$REDIS_ANNOUNCE")"
    printf 'sentinel monitor %s %s %s %s\n' "$master" "$(host_of "$primary")" "$(port_of "$primary")" \
      "${REDIS_SENTINEL_QUORUM:-2}"
    printf 'sentinel down-after-milliseconds %s %s\n' "$master" "${REDIS_SENTINEL_DOWN_AFTER_MS:-5000}"
    printf 'sentinel failover-timeout %s %s\n' "$master" "${REDIS_SENTINEL_FAILOVER_TIMEOUT_MS:-60000}"
    printf 'sentinel parallel-syncs %s 1\n' "$master"
    [ -z "${REDIS_PASSWORD:-}" ] || printf 'sentinel auth-pass %s "%s"\n' "$master" "$REDIS_PASSWORD"
    if [ -n "${REDIS_SENTINEL_PASSWORD:-}" ]; then
      # Also what a Sentinel sends the other Sentinels.
      printf 'requirepass "%s"\n' "$REDIS_SENTINEL_PASSWORD"
    else
      printf 'protected-mode no\n'
    fi
  } >"$conf"
  say "sentinel $REDIS_ANNOUNCE watches $master at $primary"
  exec redis-server "$conf" --sentinel
}

case "$role" in
  server) start_server ;;
  sentinel) start_sentinel ;;
  *)
    say "usage: redis-ha.sh server|sentinel"
    exit 64
    ;;
esac
