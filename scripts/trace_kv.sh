#!/usr/bin/env bash
# Traces Debian's redis-server with valgrind's lackey while redis-benchmark drives it, and
# marks where the benchmark starts (`# phase benchmark`), so start-up can be left out.
# Needs: apt-get install valgrind redis-server redis-tools. Writes OUT.lackey (several GB).
#   scripts/trace_kv.sh OUT [REQUESTS] [KEYS] [VALUE_BYTES]
set -euo pipefail
out=${1:?usage: trace_kv.sh OUT [REQUESTS] [KEYS] [VALUE_BYTES]}
requests=${2:-2000}
keys=${3:-10000}
value=${4:-100}
port=7779
log="$out.lackey"
rm -f "$log"
valgrind --tool=lackey --trace-mem=yes --log-file="$log" \
    redis-server --port "$port" --save "" --appendonly no --daemonize no >"$out.server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
# Start-up under lackey takes minutes: wait until the server answers.
for _ in $(seq 1 600); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
    sleep 1
done
redis-cli -p "$port" ping >/dev/null
start=$(wc -l <"$log")
echo "start-up: $start lines; benchmark: $requests requests of SET and GET over $keys keys, $value-byte values" >&2
redis-benchmark -p "$port" -n "$requests" -r "$keys" -d "$value" -c 1 -t set,get -q >&2
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait $server || true
trap - EXIT
# The marker goes where the benchmark began (lackey's line count when the server answered).
sed -i "${start}a # phase benchmark" "$log"
echo "$log: $(wc -l <"$log") lines" >&2
