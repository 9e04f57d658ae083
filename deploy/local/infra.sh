#!/usr/bin/env bash
# Local infrastructure for hookbay: Apache Kafka (KRaft, single node), FerretDB (MongoDB wire
# protocol) and Redis, installed from package registries only into .cache/ and run on 127.0.0.1.
#
#   deploy/local/infra.sh install   fetch/build what is missing (idempotent, cached)
#   deploy/local/infra.sh up        install, then start whatever is not running; wait until each answers
#   deploy/local/infra.sh down      stop exactly what `up` started (by pid file)
#   deploy/local/infra.sh status    one line per server
#   up/down take an optional subset, e.g. `infra.sh up kafka` (tests run a private broker this way)
#
# Settings (environment): HOOKBAY_CACHE (default <repo>/.cache), HOOKBAY_INFRA_RUN (pids, data, logs;
# default $HOOKBAY_CACHE/run), HOOKBAY_INFRA_KAFKA_PORT (9092),
# HOOKBAY_INFRA_MONGO_PORT (27017), HOOKBAY_INFRA_REDIS_PORT (6379),
# HOOKBAY_FERRETDB_BACKEND (postgresql, the default, or sqlite; see docs/ferretdb-backends.md),
# HOOKBAY_INFRA_PG_PORT (5433; PostgreSQL runs as system user hookbay-pg, created when missing),
# HOOKBAY_INFRA_PG_SHARED_BUFFERS (1GB), HOOKBAY_INFRA_PG_EXTERNAL (set: FerretDB uses the
# PostgreSQL already listening on HOOKBAY_INFRA_PG_PORT, which this run never starts or stops; the
# tests' private FerretDB shares the test PostgreSQL this way), HOOKBAY_INFRA_KAFKA_QUICK_JIT (set:
# the broker's JVM compiles with C1 only and collects with the serial GC: ~40 % less CPU for a
# broker living minutes under light load, as the tests' do; under sustained load it costs more,
# so `make run` and the benchmarks leave it unset — docs/development.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/deploy/local"
CACHE=${HOOKBAY_CACHE:-$ROOT/.cache}
RUN=${HOOKBAY_INFRA_RUN:-$CACHE/run}
LOGS="$RUN/logs"

KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$HERE/kafka/pom.xml")
FERRETDB_VERSION=$(sed -n 's:^require github.com/FerretDB/FerretDB \(v[0-9.]*\)$:\1:p' "$HERE/ferretdb/go.mod")
KAFKA_PORT=${HOOKBAY_INFRA_KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=$((KAFKA_PORT + 1))
MONGO_PORT=${HOOKBAY_INFRA_MONGO_PORT:-27017}
REDIS_PORT=${HOOKBAY_INFRA_REDIS_PORT:-6379}
PG_PORT=${HOOKBAY_INFRA_PG_PORT:-5433}
# PostgreSQL's 128 MB default holds a small fraction of a million events (heads, attempts and
# bodies are ~5 GB as FerretDB stores them); 1 GB is what docs/ferretdb-backends.md measured with
PG_SHARED_BUFFERS=${HOOKBAY_INFRA_PG_SHARED_BUFFERS:-1GB}
BACKEND=${HOOKBAY_FERRETDB_BACKEND:-postgresql}
KAFKA_LIBS="$CACHE/kafka-$KAFKA_VERSION/libs"
FERRETDB_BIN="$CACHE/ferretdb-$FERRETDB_VERSION/ferretdb"
PG_BIN=/usr/lib/postgresql/15/bin

say() { printf 'infra: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

apt_updated=0
apt_install() {
  [ "$(id -u)" = 0 ] || die "need root to apt-get install $* (or install it yourself)"
  if [ $apt_updated = 0 ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    apt_updated=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }

install_kafka() {
  # Kafka 4.x brokers need Java 17 or newer
  if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then apt_install openjdk-17-jre-headless; fi
  command -v mvn >/dev/null || apt_install maven
  [ -f "$KAFKA_LIBS/.complete" ] && return
  say "fetching Kafka $KAFKA_VERSION from Maven Central"
  rm -rf "$KAFKA_LIBS" && mkdir -p "$LOGS"
  mvn -B -ntp -f "$HERE/kafka/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS" >"$LOGS/mvn.log" 2>&1 ||
    { tail -n 30 "$LOGS/mvn.log" >&2; die "fetching Kafka with mvn failed (log: $LOGS/mvn.log)"; }
  touch "$KAFKA_LIBS/.complete"
}

# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.0` fails here: it asks the module
# proxy for the module's version list (to check deprecation), which the proxy refuses, and the
# published module lacks build/version/version.txt, which FerretDB panics without. So we build it
# from a pinned go.mod/go.sum, from a copy of the module with version.txt written in.
install_ferretdb() {
  [ -x "$FERRETDB_BIN" ] && return
  command -v go >/dev/null || die "Go (>= 1.22) is needed to build FerretDB; install it from your distribution"
  local build="$CACHE/ferretdb-$FERRETDB_VERSION/build"
  say "building FerretDB $FERRETDB_VERSION (one minute, once)"
  rm -rf "$build" && mkdir -p "$build"
  cp "$HERE/ferretdb/go.mod" "$HERE/ferretdb/go.sum" "$HERE/ferretdb/tools.go" "$build/"
  (
    cd "$build"
    export GOFLAGS=-mod=mod
    local dir
    dir=$(go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -d "$dir" ] || die "go mod download of FerretDB failed"
    cp -r "$dir" src && chmod -R u+w src
    echo "$FERRETDB_VERSION" > src/build/version/version.txt
    go mod edit -replace "github.com/FerretDB/FerretDB=./src"
    go build -trimpath -o "$FERRETDB_BIN.tmp" github.com/FerretDB/FerretDB/cmd/ferretdb
  ) >&2
  mv "$FERRETDB_BIN.tmp" "$FERRETDB_BIN"
  rm -rf "$build"
}

install_redis() {
  command -v redis-server >/dev/null || apt_install redis-server
}

install_postgres() {
  [ -x "$PG_BIN/postgres" ] || apt_install postgresql-15
  id hookbay-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin hookbay-pg
}

install_all() {
  install_kafka
  install_ferretdb
  install_redis
  [ "$BACKEND" = postgresql ] && install_postgres
  return 0
}

# --- processes -------------------------------------------------------------------------------

pidfile() { echo "$RUN/$1.pid"; }

running() { # name -> 0 when our recorded process is alive
  local pf; pf=$(pidfile "$1")
  [ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

claim_port() { # name port: fail clearly when someone else listens there
  if port_open "$2"; then
    local who; who=$(ss -ltnpH "sport = :$2" 2>/dev/null | sed -n 's/.*users:((\(.*\)))/\1/p' | head -1)
    die "port $2 (for $1) is taken by another process ${who:+($who)}; stop it or set HOOKBAY_INFRA_*_PORT"
  fi
}

start_bg() { # name command...
  local name=$1; shift
  mkdir -p "$LOGS"
  setsid nohup "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! > "$(pidfile "$name")"
}

wait_for() { # name port [log-line]
  local name=$1 port=$2 line=${3:-} deadline=$((SECONDS + 90))
  until port_open "$port" && { [ -z "$line" ] || grep -q "$line" "$LOGS/$name.log"; }; do
    if ! running "$name"; then
      say "$name exited during start-up; last lines of $LOGS/$name.log:"
      tail -n 20 "$LOGS/$name.log" >&2
      exit 1
    fi
    [ $SECONDS -lt $deadline ] || { tail -n 20 "$LOGS/$name.log" >&2; die "$name did not answer on port $port within 90 s"; }
    sleep 0.2
  done
  say "$name ready on 127.0.0.1:$port"
}

up_kafka() {
  running kafka && { say "kafka already running"; return; }
  claim_port kafka "$KAFKA_PORT"; claim_port kafka-controller "$KAFKA_CONTROLLER_PORT"
  local dir="$RUN/kafka"
  mkdir -p "$dir/data"
  sed -e "s|@PORT@|$KAFKA_PORT|g" -e "s|@CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" \
      -e "s|@DATA@|$dir/data|g" "$HERE/kafka/server.properties.in" > "$dir/server.properties"
  local jvm=(-XX:+UseG1GC)
  [ -z "${HOOKBAY_INFRA_KAFKA_QUICK_JIT:-}" ] || jvm=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1)
  local java=(java -Xms256m -Xmx768m "${jvm[@]}" -Djava.awt.headless=true
              "-Dlog4j2.configurationFile=$HERE/kafka/log4j2.properties" -cp "$KAFKA_LIBS/*")
  if [ ! -f "$dir/data/meta.properties" ]; then
    local cluster_id  # the id is the last line: anything logged before it must not end up in it
    cluster_id=$(java -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    "${java[@]}" kafka.tools.StorageTool format --ignore-formatted -t "$cluster_id" \
      -c "$dir/server.properties" >/dev/null
  fi
  mkdir -p "$LOGS" && { [ ! -f "$LOGS/kafka.log" ] || mv "$LOGS/kafka.log" "$LOGS/kafka.log.1"; }
  start_bg kafka "${java[@]}" kafka.Kafka "$dir/server.properties"
  wait_for kafka "$KAFKA_PORT" "Kafka Server started"
}

# The embedded store's GIN indexes (deploy/local/ferretdb/indexes.sql): an event trigger that
# indexes every table FerretDB creates, and the tables that exist already. Idempotent; run on
# every `up`, so a data directory from before the step gets it too.
index_store() {
  runuser -u hookbay-pg -- psql -h 127.0.0.1 -p "$PG_PORT" -U hookbay -d ferretdb -q \
    -v ON_ERROR_STOP=1 -f - <"$HERE/ferretdb/indexes.sql" 2>&1 | grep -v NOTICE >&2 || true
  runuser -u hookbay-pg -- psql -h 127.0.0.1 -p "$PG_PORT" -U hookbay -d ferretdb -tAc \
    "SELECT 1 FROM pg_event_trigger WHERE evtname = 'hookbay_gin_on_create'" | grep -q 1 ||
    die "could not install the embedded store's indexes (deploy/local/ferretdb/indexes.sql)"
}

up_postgres() {
  running postgres && { say "postgres already running"; index_store; return; }
  claim_port postgres "$PG_PORT"
  local data="$RUN/postgres"
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data" && chown hookbay-pg "$data"
    runuser -u hookbay-pg -- "$PG_BIN/initdb" -D "$data" -U hookbay -A trust >/dev/null
  fi
  # a fresh log, so the readiness line waited for is this start's (after an unclean stop,
  # recovery runs before it; an appended log would hold the last run's line already)
  mkdir -p "$LOGS" && { [ ! -f "$LOGS/postgres.log" ] || mv "$LOGS/postgres.log" "$LOGS/postgres.log.1"; }
  touch "$LOGS/postgres.log" && chown hookbay-pg "$LOGS/postgres.log"
  start_bg postgres runuser -u hookbay-pg -- "$PG_BIN/postgres" -D "$data" -p "$PG_PORT" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories="$data" -c fsync=off \
    -c synchronous_commit=off -c full_page_writes=off -c shared_buffers="$PG_SHARED_BUFFERS"
  wait_for postgres "$PG_PORT" "ready to accept connections"
  runuser -u hookbay-pg -- psql -h 127.0.0.1 -p "$PG_PORT" -U hookbay -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='ferretdb'" | grep -q 1 ||
    runuser -u hookbay-pg -- psql -h 127.0.0.1 -p "$PG_PORT" -U hookbay -d postgres -qc "CREATE DATABASE ferretdb"
  index_store
}

up_ferretdb() {
  running ferretdb && { say "ferretdb already running"; return; }
  claim_port ferretdb "$MONGO_PORT"
  local backend_args
  if [ "$BACKEND" = postgresql ]; then
    backend_args=(--handler=postgresql "--postgresql-url=postgres://hookbay@127.0.0.1:$PG_PORT/ferretdb")
  else
    mkdir -p "$RUN/ferretdb/sqlite"
    backend_args=(--handler=sqlite "--sqlite-url=file:$RUN/ferretdb/sqlite/")
  fi
  start_bg ferretdb "$FERRETDB_BIN" "${backend_args[@]}" "--listen-addr=127.0.0.1:$MONGO_PORT" \
    "--state-dir=$RUN/ferretdb" --debug-addr=- --telemetry=disable --log-level=warn --log-format=json
  wait_for ferretdb "$MONGO_PORT"
}

up_redis() {
  running redis && { say "redis already running"; return; }
  claim_port redis "$REDIS_PORT"
  mkdir -p "$RUN/redis"
  start_bg redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$RUN/redis" \
    --save "" --appendonly no --daemonize no --protected-mode yes
  wait_for redis "$REDIS_PORT"
}

stop() { # name
  local pf pid; pf=$(pidfile "$1")
  [ -f "$pf" ] || return 0
  pid=$(cat "$pf")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    say "$1 stopped"
  fi
  rm -f "$pf"
}

status() {
  local name names=(kafka ferretdb redis)
  [ "$BACKEND" = postgresql ] && names=(kafka ferretdb postgres redis)
  for name in "${names[@]}"; do
    if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"
    else echo "$name: stopped"; fi
  done
}

wanted() { # name: true when no names were given or this one was
  [ ${#ONLY[@]} -eq 0 ] && return 0
  local n; for n in "${ONLY[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

mkdir -p "$RUN"
command=${1:-}; shift || true
ONLY=("$@")  # optional subset: kafka ferretdb postgres redis
for n in "${ONLY[@]}"; do
  case "$n" in kafka|ferretdb|postgres|redis) ;; *) die "unknown server '$n' (kafka, ferretdb, postgres, redis)" ;; esac
done
case "$command" in
  install) install_all ;;
  up)
    install_all
    if wanted kafka; then up_kafka; fi
    if [ "$BACKEND" = postgresql ] && [ -z "${HOOKBAY_INFRA_PG_EXTERNAL:-}" ] &&
       { wanted postgres || wanted ferretdb; }; then up_postgres; fi
    if wanted ferretdb; then up_ferretdb; fi
    if wanted redis; then up_redis; fi
    ;;
  down)  # side by side; FerretDB before the PostgreSQL under it
    { if wanted ferretdb; then stop ferretdb; fi; if wanted postgres; then stop postgres; fi; } &
    for n in kafka redis; do if wanted "$n"; then stop "$n" & fi; done
    wait
    ;;
  status) status ;;
  *) echo "usage: $0 install|up|down|status [kafka|ferretdb|postgres|redis ...]" >&2; exit 2 ;;
esac
