#!/usr/bin/env bash
# make fleet-distributed (SPEC F6-F8): the fleet beyond one machine, on one machine. Two outbox-mocks behind haproxy
# (contrib/haproxy/outbox-mocks.cfg, routed by Install-ID), a Locust master and two workers as processes
# (contrib/locust/locustfile.py), each worker running one `outbox fleet` shard of FLEET_DEVICES devices x FLEET_EVENTS
# events under the flaky scenario, accounted against both mocks:
#   1. balance hdr(Install-ID): the master must exit 0 with lost 0 and cross_mock_duplicates 0;
#   2. balance roundrobin and lost acknowledgements: a device's retries land on the other mock, so the master must
#      exit 1 with cross_mock_duplicates > 0 (the accounting sees it).
# As root (with iproute2), the second worker runs in a network namespace of its own behind a veth pair, and the
# mocks, haproxy and the master listen on the veth's address: that worker reaches them over a link.
#
#   FLEET_DEVICES=500 FLEET_EVENTS=100 CHECK_CONFIG=release scripts/fleet-distributed.sh
# Needs haproxy and python3's venv module (the Makefile installs them) and PyPI for locust and hdrhistogram
# (contrib/locust/requirements.txt, into .build/locust-venv once).
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${FLEET_DEVICES:-500}
events=${FLEET_EVENTS:-100}
config=${CHECK_CONFIG:-release}
bin=$PWD/.build/$config
venv=.build/locust-venv
work=$(mktemp -d /tmp/outbox-fleet-distributed-XXXXXX)
pids=()
ns=""
link=ofd$$
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "$ns" ]; then ip netns delete "$ns" 2>/dev/null || true; ip link delete "${link}a" 2>/dev/null || true; fi
    if [ "${keep:-0}" = 1 ]; then echo "fleet-distributed: work files kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
say() { echo "fleet-distributed: $*"; }
fail() { echo "fleet-distributed: FAILED: $*" >&2; keep=1; exit 1; }

for tool in "$bin/outbox" "$bin/outbox-mock"; do [ -x "$tool" ] || fail "$tool is missing (build it first)"; done
command -v haproxy >/dev/null || fail "haproxy is not installed (make fleet-distributed installs it)"
stamp=$venv/outbox-pinned.txt
if ! cmp -s contrib/locust/requirements.txt "$stamp"; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check -r contrib/locust/requirements.txt \
        || fail "pip install of contrib/locust/requirements.txt failed (no access to PyPI?)"
    cp contrib/locust/requirements.txt "$stamp"
fi
"$venv/bin/python" -c "import locust, hdrh" || fail "locust or hdrhistogram is missing from $venv"
"$venv/bin/python" -m unittest -q contrib/locust/test_fleet_merge.py 2>&1 | tail -1
say "the merge gives the union's percentiles (contrib/locust/test_fleet_merge.py)"

addr=127.0.0.1
run_in_ns=()
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add "outbox-fd-$$" 2>/dev/null; then
    ns=outbox-fd-$$
    ip link add "${link}a" type veth peer name "${link}b"
    ip link set "${link}b" netns "$ns"
    ip addr add 10.213.0.1/30 dev "${link}a"
    ip link set "${link}a" up
    ip netns exec "$ns" ip addr add 10.213.0.2/30 dev "${link}b"
    ip netns exec "$ns" ip link set "${link}b" up
    ip netns exec "$ns" ip link set lo up
    # A default route, as a worker host has: without one the engines' reachability (SPEC N1) reads offline.
    ip netns exec "$ns" ip route add default via 10.213.0.1
    addr=10.213.0.1
    run_in_ns=(ip netns exec "$ns")
    say "worker 2 runs in network namespace $ns, over a veth link to $addr"
else
    say "not root (or no iproute2): every process on 127.0.0.1"
fi

free_port() { python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$addr"; }
wait_listening() {  # HOST PORT
    for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0; sleep 0.05; done
    fail "nothing listens on $1:$2"
}
start_mock() {  # VARIABLE SCENARIO (a fixture's name or a file): starts a mock, sets VARIABLE to its URL
    local port
    port=$(free_port)
    local scenario="Fixtures/scenarios/$2.json"
    [ -f "$2" ] && scenario=$2
    "$bin/outbox-mock" --host "$addr" --port "$port" --scenario "$scenario" >"$work/$1.out" 2>&1 &
    pids+=($!)
    wait_listening "$addr" "$port"
    printf -v "$1" '%s' "http://$addr:$port"
}
start_haproxy() {  # CONFIG
    lb=$(free_port)
    OUTBOX_LB_BIND="$addr:$lb" OUTBOX_MOCK_1="${mock1#http://}" OUTBOX_MOCK_2="${mock2#http://}" \
        haproxy -f "$1" -db >"$work/haproxy.out" 2>&1 &
    haproxy_pid=$!
    pids+=($haproxy_pid)
    wait_listening "$addr" "$lb"
}
run_locust() {  # NAME [MORE FLEET ARGS] → the master's exit status; fleet-merged.json in $work/NAME
    local master_port
    master_port=$(free_port)
    local fleet_args="--testing --interval 0.5 --retry-intervals 0.2,0.5,1 --timeout 120 --seed 3 ${2:-}"
    "$venv/bin/locust" -f contrib/locust/locustfile.py --master --headless --expect-workers 2 -u 2 -r 2 \
        --master-bind-host "$addr" --master-bind-port "$master_port" --loglevel WARNING \
        --fleet-binary "$bin/outbox" --fleet-devices "$devices" --fleet-events "$events" \
        --fleet-endpoint "http://$addr:$lb" --fleet-accounting-endpoint "$mock1" --fleet-accounting-endpoint "$mock2" \
        --fleet-args "$fleet_args" --fleet-out "$work/$1" >"$work/$1.master.out" 2>&1 &
    local master=$!
    for worker in 1 2; do
        local prefix=()
        [ "$worker" = 2 ] && prefix=("${run_in_ns[@]}")
        "${prefix[@]}" "$venv/bin/locust" -f contrib/locust/locustfile.py --worker --master-host "$addr" \
            --master-port "$master_port" --loglevel WARNING >"$work/$1.worker$worker.out" 2>&1 &
        pids+=($!)
        worker_pid=$!
    done
    if [ -n "${kill_after:-}" ]; then
        # A worker host lost mid-run: its locust and its shard go at once, as with a machine that dies. The worker is
        # stopped first: killed after its shard, it could still see the shard's exit and report it as a failed shard
        # before dying (a fresh clone's make test did), which is not the loss this checks.
        sleep "$kill_after"
        kill -STOP "$worker_pid" 2>/dev/null || true
        pkill -KILL -P "$worker_pid" 2>/dev/null || true
        kill -KILL "$worker_pid" 2>/dev/null || true
    fi
    local status=0
    wait "$master" || status=$?
    return $status
}

start_mock mock1 flaky
start_mock mock2 flaky
start_haproxy contrib/haproxy/outbox-mocks.cfg
started=$(date +%s)
status=0; run_locust routed || status=$?
merged=$work/routed/fleet-merged.json
[ -f "$merged" ] || fail "routed by Install-ID: no fleet-merged.json (master exit $status): $(tail -5 "$work/routed.master.out")"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$1" "$2"; }
say "routed by Install-ID: master exit $status in $(( $(date +%s) - started )) s: $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print({k: m[k] for k in ("shards","reported","tracked","delivered","duplicates","pending","lost","cross_mock_duplicates","delay_ms","problems")})' "$merged")"
[ "$status" = 0 ] && [ "$(field "$merged" lost)" = 0 ] && [ "$(field "$merged" cross_mock_duplicates)" = 0 ] \
    && [ "$(field "$merged" tracked)" = "$(( 2 * devices * (events + 2) ))" ] \
    && [ "$(field "$merged" delivered)" = "$(field "$merged" tracked)" ] \
    || fail "routed by Install-ID: expected exit 0, everything delivered, lost 0, cross_mock_duplicates 0 ($(tail -5 "$work/routed.master.out"))"

# The second half: a balancer that ignores the device, and acknowledgements that get lost (the mock records the
# batch, then drops the connection): the engine's resend reaches the other mock, which records it again.
kill "$haproxy_pid"
for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
# Fixtures' lost-ack drops the first 2 requests of each mock: 4 resends, each reaching the other mock by even odds,
# so 1 run in 16 saw no cross-mock duplicate. The first 12 of each: 24 resends, 1 run in 16 million.
cat >"$work/lost-acks.json" <<'JSON'
{"description": "The first 12 requests are recorded, then the connection closes without an answer.", "seed": 1,
 "rules": [{"match": {"requests": "1-12"}, "action": "drop_after_body"}]}
JSON
start_mock mock1 "$work/lost-acks.json"
start_mock mock2 "$work/lost-acks.json"
sed -e 's/balance hdr(Install-ID)/balance roundrobin/' -e '/hash-type consistent/d' contrib/haproxy/outbox-mocks.cfg >"$work/roundrobin.cfg"
start_haproxy "$work/roundrobin.cfg"
started=$(date +%s)
status=0; run_locust scattered || status=$?
merged=$work/scattered/fleet-merged.json
[ -f "$merged" ] || fail "round robin: no fleet-merged.json (master exit $status): $(tail -5 "$work/scattered.master.out")"
cross=$(field "$merged" cross_mock_duplicates)
say "round robin with lost acknowledgements: master exit $status in $(( $(date +%s) - started )) s, cross_mock_duplicates $cross, lost $(field "$merged" lost)"
[ "$status" = 1 ] && [ "$cross" != None ] && [ "$cross" -gt 0 ] \
    || fail "round robin: expected exit 1 and cross_mock_duplicates > 0"
[ -s "$work/routed/fleet-merged.html" ] || fail "no fleet-merged.html"

# A worker lost mid-run (killed with its shard): the master must fail the run naming that shard, and not wait for
# it to report.
kill "$haproxy_pid"
start_haproxy contrib/haproxy/outbox-mocks.cfg
started=$(date +%s)
status=0; kill_after=3 run_locust lost "--rate 2" || status=$?
merged=$work/lost/fleet-merged.json
[ -f "$merged" ] || fail "a lost worker: no fleet-merged.json (master exit $status): $(tail -5 "$work/lost.master.out")"
problems=$(field "$merged" problems)
say "a worker killed after 3 s: master exit $status in $(( $(date +%s) - started )) s: $problems"
[ "$status" = 1 ] && grep -q "its worker was lost" <<<"$problems" || fail "a lost worker: expected exit 1 naming its shard"
say "ok: 2 x $devices devices x $events events; routed: nothing lost, no cross-mock duplicate; scattered: seen and failed; a lost worker: named and failed"
