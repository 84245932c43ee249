#!/usr/bin/env bash
# Starts (or reuses) a single-node Apache Kafka broker in KRaft mode on $KAFKA_BROKERS
# (default 127.0.0.1:9092), from the Kafka jars on Maven Central. Idempotent.
#   infra/kafka.sh start | stop | status | restart
# Jars are resolved once by Maven (infra/kafka/pom.xml) into .run/kafka/libs; data lives in
# .run/kafka/data and survives restarts; the broker logs to .run/kafka/broker.log.
# KAFKA_SASL_USERS="admin:secret,alice:other" makes the client listener SASL_PLAINTEXT with
# SCRAM-SHA-256 and SCRAM-SHA-512: the users are added when the storage is formatted (KRaft keeps
# SCRAM credentials in its metadata), and the first one is the broker's own (inter-broker) user.
# KAFKA_HEAP sets the broker's heap (512m); KAFKA_JVM_OPTS adds JVM options to it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KAFKA_DIR="$RUN_DIR/kafka"
# Jars are shared by every broker this checkout starts (tests start their own on other ports).
LIBS="${KAFKA_LIBS_DIR:-$ROOT/.run/kafka/libs}"
DATA="$KAFKA_DIR/data"
LOG="$KAFKA_DIR/broker.log"
PIDFILE="$KAFKA_DIR/broker.pid"
PROPS="$KAFKA_DIR/server.properties"
BROKER="${KAFKA_BROKERS:-127.0.0.1:9092}"
BROKER="${BROKER%%,*}"
HOST="${BROKER%:*}"
PORT="${BROKER##*:}"
# Requester refuses this port as a target (KAFKA_CONTROLLERS, by default each broker's port + 1):
# when KAFKA_CONTROLLER_PORT moves it, give Requester KAFKA_CONTROLLERS=$HOST:<that port> too.
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
HEAP="${KAFKA_HEAP:-512m}"
# A test's throwaway broker trades peak speed for a quicker start here (C1 compilation only).
JVM_OPTS="${KAFKA_JVM_OPTS:-}"
# The storage tool runs once and briefly: the quickest start is all it needs.
TOOL_JVM_OPTS=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC)
SASL_USERS="${KAFKA_SASL_USERS:-}"

resolve_jars() {
  local stamp="$LIBS/.pom.sha"
  local want lock partial
  want=$(sha1sum "$ROOT/infra/kafka/pom.xml" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  command -v mvn >/dev/null || fail "Maven (mvn) is needed to fetch the Kafka jars: apt-get install maven"
  command -v java >/dev/null || fail "Java 17+ is needed to run Kafka: apt-get install openjdk-17-jre-headless"
  # Test files start brokers of their own at once, each through this script: one resolves while
  # the others wait, and the jars appear whole (resolved aside, then moved) or not at all.
  mkdir -p "$(dirname "$LIBS")" "$KAFKA_DIR"
  exec {lock}>"$LIBS.lock"
  flock "$lock"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exec {lock}>&-
    return 0
  fi
  say "resolving Kafka jars from Maven Central (once) ..."
  partial="$LIBS.partial.$$"
  rm -rf "$partial" && mkdir -p "$partial"
  mvn -q -B -f "$ROOT/infra/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$partial" -DincludeScope=runtime >"$KAFKA_DIR/mvn.log" 2>&1 ||
    { rm -rf "$partial"; tail -n 30 "$KAFKA_DIR/mvn.log" >&2; fail "mvn could not resolve the Kafka jars (see $KAFKA_DIR/mvn.log)"; }
  echo "$want" >"$partial/.pom.sha"
  rm -rf "$LIBS" && mv "$partial" "$LIBS"
  exec {lock}>&-
}

# The listener of clients (and of the broker to itself): PLAINTEXT, or SASL_PLAINTEXT with SCRAM.
listener_props() {
  if [ -z "$SASL_USERS" ]; then
    cat <<PROPS
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
PROPS
    return
  fi
  local first=${SASL_USERS%%,*}
  cat <<PROPS
listeners=SASL_PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=SASL_PLAINTEXT://$HOST:$PORT
inter.broker.listener.name=SASL_PLAINTEXT
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${first%%:*}" password="${first#*:}";
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${first%%:*}" password="${first#*:}";
PROPS
}

# --add-scram arguments of `kafka-storage format`: every user, both SCRAM mechanisms.
scram_args() {
  local user
  IFS=',' read -ra users <<<"$SASL_USERS"
  for user in "${users[@]}"; do
    for mechanism in SCRAM-SHA-256 SCRAM-SHA-512; do
      printf '%s\n' --add-scram "$mechanism=[name=${user%%:*},password=${user#*:}]"
    done
  done
}

write_props() {
  # It may hold the broker's own SASL password: readable by its owner only.
  (umask 077 && : >"$PROPS")
  cat >"$PROPS" <<PROPS
# Written by infra/kafka.sh: one node that is both broker and KRaft controller.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
$(listener_props)
controller.listener.names=CONTROLLER
log.dirs=$DATA
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=168
log.segment.bytes=67108864
PROPS
}

# A KRaft cluster id as `kafka-storage random-uuid` prints it (16 random bytes, URL-safe base64
# without padding, not starting with "-"), without starting a JVM for it.
cluster_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    [ "${id:0:1}" != "-" ] && [ "$id" != "AAAAAAAAAAAAAAAAAAAAAA" ] && [ "$id" != "AAAAAAAAAAAAAAAAAAAAAQ" ] && break
  done
  echo "$id"
}

running_pid() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && cat "$PIDFILE"
}

start() {
  if port_open "$HOST" "$PORT"; then
    say "Kafka already listening on $HOST:$PORT — reusing it"
    return 0
  fi
  mkdir -p "$KAFKA_DIR" "$DATA"
  resolve_jars
  write_props
  local cp="$LIBS/*"
  if [ ! -f "$DATA/meta.properties" ]; then
    say "formatting KRaft storage in $DATA"
    local id
    id=$(cluster_id)
    local scram=()
    [ -n "$SASL_USERS" ] && mapfile -t scram < <(scram_args)
    java "${TOOL_JVM_OPTS[@]}" -cp "$cp" kafka.tools.StorageTool format -t "$id" -c "$PROPS" "${scram[@]}" >>"$LOG" 2>&1 ||
      { tail -n 20 "$LOG" >&2; fail "kafka storage format failed (see $LOG)"; }
  fi
  say "starting Kafka broker on $HOST:$PORT (log: $LOG)"
  # setsid: the broker must outlive the shell that started it (and not get its signals).
  # $JVM_OPTS unquoted: it may hold several options, split on spaces.
  setsid nohup java -Xms256m -Xmx"$HEAP" -XX:+UseG1GC $JVM_OPTS -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$cp" kafka.Kafka "$PROPS" >>"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_port "$HOST" "$PORT" 90 "Kafka" "$LOG"
  say "Kafka is up (pid $(cat "$PIDFILE"))"
}

stop() {
  local pid
  if pid=$(running_pid); then
    say "stopping Kafka (pid $pid)"
    kill "$pid"
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { say "Kafka did not stop in 30s, killing"; kill -9 "$pid"; }
    rm -f "$PIDFILE"
  else
    say "no Kafka started by this project is running"
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) if port_open "$HOST" "$PORT"; then echo "kafka: up on $HOST:$PORT"; else echo "kafka: down"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
