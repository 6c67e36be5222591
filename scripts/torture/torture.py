#!/usr/bin/env python3
"""make torture: crash rounds, a full disk, clock jumps, corruption while stopped and a soak, against the release
`outbox emit` and `outbox-mock` (SPEC S1-S7, A9, C, R, X). Python 3 standard library only.

Prints one line per check and `N passed, N failed`, writes torture/REPORT.md (with torture/soak.svg), exits 1 on any
failure. Scale with TORTURE_ROUNDS (default 1000), TORTURE_DEST_ROUNDS (default TORTURE_ROUNDS / 20) and
TORTURE_SOAK_S (default 120); TORTURE_ONLY=crash,dests,disk,clock,corrupt,rotate,soak,tsan runs a subset: each part's checks and figures are kept in torture/results.json with the commit and
date they ran at, so a subset replaces only its own sections and the report says when each part last ran.
The `tsan` part is `make sanitize-thread` (scripts/sanitize.sh thread): the whole Swift suite under ThreadSanitizer.

Testing hooks of the engine it relies on (both inert unless set):
- OUTBOX_TESTING_PHASE_FILE: one byte per phase (tracking, commit, checkpoint, request in flight), '1' while under
  way; read after each SIGKILL to know what the process was doing at that instant.
- outbox emit --testing-clock-offset-file: a wall-clock offset in ms, re-read every 100 ms by the engine's clock.
"""
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("TORTURE_BIN_DIR", os.path.join(ROOT, ".build", "release"))
OUTBOX = os.path.join(BIN_DIR, "outbox")
MOCK = os.path.join(BIN_DIR, "outbox-mock")
OUT_DIR = os.path.join(ROOT, "torture")
ROUNDS = int(os.environ.get("TORTURE_ROUNDS", "1000"))
SOAK_S = int(os.environ.get("TORTURE_SOAK_S", "120"))
ALL_PARTS = ["crash", "dests", "disk", "clock", "corrupt", "rotate", "soak", "tsan"]
# Two-destination rounds killed with SIGKILL (BEHAVIOUR D16, D17): one per twenty crash rounds, at least 20.
DEST_ROUNDS = int(os.environ.get("TORTURE_DEST_ROUNDS", str(max(20, ROUNDS // 20))))
# Key rotations killed at a random moment (SPEC K1, R8): one per ten crash rounds.
ROTATIONS = max(10, ROUNDS // 10)
ONLY = [p for p in os.environ.get("TORTURE_ONLY", ",".join(ALL_PARTS)).split(",") if p]
SEED = int(os.environ.get("TORTURE_SEED", "20261124"))
PHASES = ["tracking", "commit", "checkpoint", "request"]
SECRET = "torture-secret"
DAY_MS = 86_400_000
# The crash rounds' store cap: small, so that WAL checkpoints (a quarter of the cap's pages) come often, and large
# enough that the backlog a few killed rounds leave never reaches it (an eviction would be a gap).
CRASH_CAP = 4 << 20
ROUNDS_PER_STORE = 90
# No `outbox emit` sends a request sooner than this after its spawn (exec, loading, opening the store).
STARTUP_MS = 15
# How long a round waits for its phase before it kills anyway (the kill then counts in the phases under way).
PHASE_WAIT_S = 2.0
# Logs waiting in a crash store above which a process that is not killed delivers them first.
DRAIN_ABOVE = 4000

rng = random.Random(SEED)
results = []          # (part, name, ok, detail)
report = {}           # part -> dict of figures for REPORT.md


def check(part, name, ok, detail="", stderr=""):
    """Records and prints one check; `stderr` (a child's) is shown only when the check fails."""
    if not ok and stderr.strip():
        detail += f"; stderr: {' '.join(stderr.split())[-300:]}"
    results.append((part, name, bool(ok), detail))
    print(f"{'ok  ' if ok else 'FAIL'} {part}: {name}" + (f" ({detail})" if detail else ""), flush=True)
    return ok


def elapsed(start):
    return time.monotonic() - start


# ---------------------------------------------------------------------------------------------------------------
# The mock server and the CLI

class Mock:
    """outbox-mock as a child process, recording every exchange (log ids, answer, fault) to a file."""

    def __init__(self, work, name, scenario):
        self.record = os.path.join(work, f"{name}.record.jsonl")
        scenario_path = os.path.join(work, f"{name}.scenario.json")
        with open(scenario_path, "w") as f:
            json.dump(scenario, f)
        self.proc = subprocess.Popen([MOCK, "--port", "0", "--scenario", scenario_path, "--record", self.record],
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(work, f"{name}.mock.err"), "w"),
                                     text=True)
        line = self.proc.stdout.readline().strip()
        self.t0 = time.monotonic()
        if not line.startswith("listening on "):
            raise RuntimeError(f"outbox-mock did not start: {line!r}")
        self.url = line[len("listening on "):]
        self.skew_ms = 0.0
        self.calibrate()

    def calibrate(self):
        """`at` in the record counts from a moment of the server's start that can be well before its `listening on`
        line (under load, by a hundred ms and more): a few requests outside /_mock/ (answered 404, recording no
        log) tell the difference, so that kill times land on the record's time base."""
        skews = []
        for _ in range(3):
            before = self.ms()
            try:
                self._request("/torture-calibration")
            except urllib.error.HTTPError:
                pass
            after = self.ms()
            lines = [l for l in self._request("/_mock/requests").splitlines() if l.strip()]
            skews.append((json.loads(lines[-1])["at"] - (before + after) / 2, after - before))
        self.skew_ms = min(skews, key=lambda s: s[1])[0]

    def ms(self):
        """Now, on the record's time base (once calibrated)."""
        return (time.monotonic() - self.t0) * 1000 + getattr(self, "skew_ms", 0.0)

    def _request(self, path, method="GET", body=None):
        req = urllib.request.Request(self.url + path, method=method, data=body)
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.read()

    def stats(self):
        return json.loads(self._request("/_mock/stats"))

    def logs(self):
        out = []
        for line in self._request("/_mock/logs").splitlines():
            if line.strip():
                out.append(json.loads(line))
        return out

    def set_scenario(self, scenario):
        self._request("/_mock/scenario", "PUT", json.dumps(scenario).encode())

    def exchanges(self):
        with open(self.record) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def emit_args(store, count, mock=None, prefix="emit", extra=()):
    args = [OUTBOX, "emit", "--store", store, "--count", str(count), "--name-prefix", prefix]
    if mock is not None:
        args += ["--endpoint", mock.url, "--app-secret", SECRET]
    return args + list(extra)


def run_emit(store, count, mock=None, prefix="emit", extra=(), env=None, timeout=300):
    """Runs `outbox emit` to its end: (exit code, parsed JSON or None, stderr)."""
    proc = subprocess.run(emit_args(store, count, mock, prefix, extra), capture_output=True, text=True,
                          timeout=timeout, env=env)
    parsed = None
    try:
        parsed = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    except (ValueError, IndexError):
        parsed = None
    return proc.returncode, parsed, proc.stderr


def ordinal(log):
    for p in log.get("typedProperties") or []:
        if p.get("name") == "i":
            return int(p["value"])
    return None


def run_of(log):
    """The run a log belongs to: its event name without the `-critical` suffix."""
    name = log.get("name") or ""
    return name[:-len("-critical")] if name.endswith("-critical") else name


def ordinals_by_run(logs, prefix=None):
    runs = {}
    for log in logs:
        run = run_of(log)
        if prefix is not None and not run.startswith(prefix):
            continue
        runs.setdefault(run, []).append(ordinal(log))
    return runs


def gap_free(ordinals):
    """Whether the ordinals are exactly 0..n-1, each once."""
    return sorted(ordinals) == list(range(len(ordinals)))


def accepted(exchange):
    """Whether the mock recorded the exchange's logs (SPEC M2: a 2xx answer or a lost acknowledgement)."""
    if exchange.get("action") == "drop_after_body":
        return True
    status = (exchange.get("response") or {}).get("status")
    return exchange.get("action") is None and (status is None or 200 <= status < 300)


def answered_at(exchange):
    return exchange["at"] + ((exchange.get("response") or {}).get("delay_ms") or 0)


def explain_duplicates(exchanges, procs):
    """Duplicates: every acceptance of a log after its first must follow an acceptance whose answer the client
    never had: a lost acknowledgement, or an answer within 1 s before a kill (or a request still in flight at it).
    `procs`: (spawn, end, "kill" or "exit") of each process, one after another, on the record's time base.
    Returns (duplicates, explained by kind, unexplained)."""
    import bisect
    spawns = [p[0] for p in procs]
    seen = {}
    dup_total = 0
    explained = {"lost acknowledgement": 0, "answered <= 1 s before a kill": 0, "in flight at a kill": 0,
                 "in flight when its process exited (C8: shutdown cancels it)": 0}
    unexplained = []
    for ex in exchanges:
        if not accepted(ex):
            continue
        for log_id in ex.get("log_ids") or []:
            prev = seen.get(log_id)
            seen[log_id] = ex
            if prev is None:
                continue
            dup_total += 1
            if prev.get("action") == "drop_after_body":
                explained["lost acknowledgement"] += 1
                continue
            # The sender: the last process started at least STARTUP_MS before the request (processes run one
            # after another, and none sends sooner after its start). Its answer was lost with the process if the
            # process ended before the answer, or came so shortly before a kill that the deletion of the
            # delivered rows had not committed yet. The mock stamps a request (`at`) when its event loop reads
            # the head, which on a loaded machine can be after the sender's death (the bytes were in the socket).
            answer = answered_at(prev)
            i = bisect.bisect_right(spawns, prev["at"] - STARTUP_MS) - 1
            end, kind = (procs[i][1], procs[i][2]) if i >= 0 else (None, None)
            if end is not None and end <= answer + 20:
                explained["in flight at a kill" if kind == "kill" else
                          "in flight when its process exited (C8: shutdown cancels it)"] += 1
            elif kind == "kill" and end - answer <= 1000:
                explained["answered <= 1 s before a kill"] += 1
            else:
                unexplained.append((log_id, prev["at"], answer, end, kind))
    return dup_total, explained, unexplained


def unacknowledged_logs(exchanges, procs):
    """The mock records a vendor's requests with their log count but no ids, so a vendor's duplicates are bounded
    rather than matched: the logs of accepted requests whose answer the client never had (a lost acknowledgement,
    or in flight at, or answered within 1 s before, its process's end), which are all that may be sent again."""
    import bisect
    spawns = [p[0] for p in procs]
    total = 0
    for ex in exchanges:
        if not accepted(ex) or not ex.get("logs"):
            continue
        if ex.get("action") == "drop_after_body":
            total += ex["logs"]
            continue
        answer = answered_at(ex)
        i = bisect.bisect_right(spawns, ex["at"] - STARTUP_MS) - 1
        end, kind = (procs[i][1], procs[i][2]) if i >= 0 else (None, None)
        if end is not None and (end <= answer + 20 or (kind == "kill" and end - answer <= 1000)):
            total += ex["logs"]
    return total


# ---------------------------------------------------------------------------------------------------------------
# Crash rounds

def crash_rounds(work):
    part = "crash"
    # SPEC T4 allows an install 200 distinct event names; each round is a run with names of its own (`rN`,
    # `rN-critical`), so the rounds move to a fresh store (a fresh install) every ROUNDS_PER_STORE rounds.
    stores = []
    phase_file = os.path.join(work, "phase")
    scenario = {"seed": SEED, "description": "torture crash rounds: lost acknowledgements, 503s, slow answers",
                "rules": [
                    {"match": {"probability": 0.08}, "action": "drop_after_body"},
                    {"match": {"probability": 0.2}, "respond": {"status": 503}},
                    {"match": {"probability": 0.25}, "respond": {"delay_ms": 120}},
                ]}
    mock = Mock(work, "crash", scenario)
    env = dict(os.environ, OUTBOX_TESTING_PHASE_FILE=phase_file)
    kills = {p: 0 for p in PHASES}
    primary = {p: 0 for p in PHASES}
    primary["none"] = 0
    kill_times = []
    natural_exits = 0
    failed_exits = []
    err_path = os.path.join(work, "crash.emit.err")
    out_path = os.path.join(work, "crash.emit.out")
    exits = []            # when a round's process ended by itself, on the record's time base
    evictions = []
    kill_log = []         # (round, ms, target, phase flags)
    procs = []            # (spawn, end, "kill" or "exit") of each round's process, on the record's time base
    drains_between = 0
    timed_out = 0
    waited_out = 0
    counts = []
    start = time.monotonic()
    fd = os.open(phase_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # A round is one kill: a process that ends by itself before its phase came is a run without a kill, and
        # the round goes on with the next process (at most twice as many processes as rounds).
        n = -1
        while len(kill_times) < ROUNDS and n + 1 < 2 * ROUNDS:
            n += 1
            # Round-robin targets, but the phase whose count lags most goes first once the others are ahead.
            lag = min(PHASES, key=lambda p: kills[p])
            target = PHASES[n % 4] if kills[PHASES[n % 4]] <= kills[lag] + 25 else lag
            os.pwrite(fd, b"0000", 0)
            if n % ROUNDS_PER_STORE == 0:
                stores.append(os.path.join(work, f"crash-{len(stores)}.outbox"))
            store = stores[-1]
            # Kills that come early leave a backlog; before it nears the cap (an eviction would be a gap), a
            # process that is not killed delivers it (faults still on). It is a process like the others for the
            # duplicates' accounting.
            status = subprocess.run([OUTBOX, "status", "--store", store], capture_output=True, text=True)
            backlog = 0
            if status.returncode == 0 and status.stdout.strip():
                st = json.loads(status.stdout)
                backlog = st["pending_normal"] + st["pending_critical"] + st["in_flight"]
            if backlog > DRAIN_ABOVE:
                drain_spawn = mock.ms()
                run_emit(store, 0, mock, "none", ["--testing", "--interval", "0.05", "--batch-size", "50",
                                                   "--retry-intervals", "0.05,0.1,0.2,0.2,0.2,0.2", "--wait-delivered",
                                                   "--timeout", "30", "--max-storage-bytes", str(CRASH_CAP)], env=env)
                procs.append((drain_spawn, mock.ms(), "exit"))
                drains_between += 1
            # A round aimed at tracking tracks a longer burst (trackEvent calls last microseconds each).
            # A checkpoint needs WAL traffic (a quarter of the cap's pages): rounds aimed at it track as much.
            count = rng.randint(1500, 2500) if target in ("tracking", "checkpoint") else rng.randint(200, 800)
            spawn_ms = mock.ms()
            proc = subprocess.Popen(
                emit_args(store, count, mock, f"r{n}",
                          ["--testing", "--interval", "0.05", "--batch-size", str(rng.choice([10, 25, 50])),
                           "--retry-intervals", "0.05,0.1,0.2", "--critical-every", "9",
                           "--max-storage-bytes", str(CRASH_CAP), "--wait-delivered", "--timeout", "10",
                           "--log-level", "info"]),
                stdout=open(out_path, "w"), stderr=open(err_path, "w"), env=env)
            counts.append(count)
            # A random earliest moment, then the first instant the target phase is seen.
            not_before = time.monotonic() + rng.uniform(0.0, 0.05 if target == "tracking" else 0.4)
            deadline = time.monotonic() + PHASE_WAIT_S
            while True:
                if proc.poll() is not None:
                    break
                now = time.monotonic()
                if now >= deadline:
                    waited_out += 1
                    break
                if now >= not_before and os.pread(fd, 4, 0)[PHASES.index(target):PHASES.index(target) + 1] == b"1":
                    break
                time.sleep(0.0003)
            if proc.poll() is None:
                kill_ms = mock.ms()
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kill_times.append(kill_ms)
                procs.append((spawn_ms, kill_ms, "kill"))
                flags = os.pread(fd, 4, 0)
                kill_log.append((n, round(kill_ms), target, flags.decode()))
                active = [p for i, p in enumerate(PHASES) if flags[i:i + 1] == b"1"]
                for p in active:
                    kills[p] += 1
                # The most specific phase: a checkpoint runs inside a commit.
                first = next((p for p in ["checkpoint", "commit", "request", "tracking"] if p in active), "none")
                primary[first] += 1
            else:
                natural_exits += 1
                exits.append(mock.ms())
                procs.append((spawn_ms, exits[-1], "exit"))
                # A round that ends by itself exits 0 having delivered everything, or 1 having waited out its
                # --timeout with logs pending (SPEC X3a; a channel disabled after its last retry, R5, waits for the
                # next start). Any other exit, or 1 with nothing pending, is a failure.
                printed = {}
                if proc.returncode in (0, 1):
                    with open(out_path) as f:
                        text = f.read().strip()
                    printed = json.loads(text.splitlines()[-1]) if text else {}
                if proc.returncode not in (0, 1) or (proc.returncode == 1) != (printed.get("pending", 0) > 0):
                    with open(err_path) as f:
                        failed_exits.append((n, proc.returncode, round(mock.ms()), " ".join(f.read().split())[-300:]))
                else:
                    if printed.get("pending", 0) > 0:
                        timed_out += 1
                    if printed.get("rejected", 0) > 0:
                        failed_exits.append((n, "rejected", printed))
            # SPEC S2: an eviction is logged (info); a gap it leaves is not a loss, but none is expected here.
            with open(err_path) as f:
                for line in f:
                    if "evicted the oldest logs" in line:
                        evictions.append((n, line.strip()[-200:]))
            if (n + 1) % 100 == 0:
                print(f"     crash: {len(kill_times)}/{ROUNDS} rounds (kills), {n + 1} processes, kills {kills}, "
                      f"{elapsed(start):.0f} s", flush=True)
        # The final drain: no faults, everything stored is delivered.
        mock.set_scenario({"seed": 1, "rules": []})
        drains = []
        for store in stores:
            drains.append(run_emit(store, 0, mock, "drain", ["--testing", "--interval", "0.05", "--wait-delivered",
                                                             "--timeout", "300", "--max-storage-bytes", str(CRASH_CAP)]))
        logs = mock.logs()
        stats = mock.stats()
        exchanges = mock.exchanges()
    finally:
        os.close(fd)
        mock.stop()
    duration = elapsed(start)
    check(part, f"{ROUNDS} rounds of kill -9", len(kill_times) == ROUNDS,
          f"{len(kill_times)} kills in {len(procs)} processes: {natural_exits} ended by themselves before their phase "
          f"came, {waited_out} killed after waiting {PHASE_WAIT_S:.0f} s for it; {duration:.0f} s")
    check(part, "every round that ended by itself exited 0", not failed_exits,
          f"{len(failed_exits)} did not: {failed_exits[:3]}")
    for p in PHASES:
        needed = 50 if ROUNDS >= 1000 else max(1, ROUNDS // 20)
        check(part, f"kills during {p} >= {needed}", kills[p] >= needed, f"{kills[p]}")
    bad_drains = [(code, out) for code, out, _ in drains
                  if not (code == 0 and out is not None and out["pending"] == 0 and out["evicted"] == 0
                          and out["expired"] == 0 and out["dead_lettered"] == 0)]
    drain = {"stores": len(stores), "delivered": sum((out or {}).get("delivered", 0) for _, out, _ in drains)}
    check(part, "final drain of every store ends with nothing pending, nothing evicted, expired or dead-lettered",
          not bad_drains, f"{len(stores)} stores, {drain['delivered']} delivered by the drain" +
          (f"; {bad_drains[:3]}" if bad_drains else ""), stderr="".join(err for _, _, err in drains[:1]))
    check(part, "no round evicted a log (the cap is above the backlog)", not evictions,
          f"{len(evictions)} evictions" + (f", e.g. {evictions[:2]}" if evictions else ""))
    runs = ordinals_by_run(logs, "r")
    bad = [r for r, o in runs.items() if not gap_free(o)]
    if bad:
        with open(os.path.join(work, "crash.logs.jsonl"), "w") as f:
            for log in logs:
                f.write(json.dumps(log) + "\n")
    check(part, "every run's ordinals are a gap-free prefix after the final drain", not bad and len(logs) > 0,
          f"{len(runs)} runs, {len(logs)} logs checked" + (f"; gaps in {sorted(bad)[:10]}" if bad else ""))
    check(part, "the mock's unique logs are the logs checked", stats["logs_unique"] == len(logs),
          f"logs_unique {stats['logs_unique']}, lines {len(logs)}")
    dup_total, explained, unexplained = explain_duplicates(exchanges, procs)
    check(part, "the mock's duplicate count is the record's", dup_total == stats["logs_duplicate"],
          f"record {dup_total}, stats {stats['logs_duplicate']}")
    late = sorted({(u[1], round(u[3] - u[2])) for u in unexplained})
    check(part, "every duplicate belongs to a lost acknowledgement or an answer within 1 s before a kill",
          not unexplained, f"{dup_total} duplicates: {explained}" +
          (f"; {len(unexplained)} unexplained, in {len(late)} requests (at, ms from answer to the next end): {late[:10]}"
           if unexplained else ""))
    with open(os.path.join(work, "crash.kills.json"), "w") as f:
        json.dump({"kills": kill_log, "exits": exits}, f)
    report["crash"] = dict(drains_between=drains_between, rounds=ROUNDS, kills=len(kill_times), natural=natural_exits, waited_out=waited_out,
                           timed_out=timed_out,
                           kills_per_phase=kills, primary=primary, logs=len(logs), runs=len(runs),
                           tracked_per_round=(min(counts), max(counts)), failed_exits=failed_exits, duplicates=dup_total, explained=explained,
                           unexplained=len(unexplained), requests=stats["requests"], faults=stats.get("faults"),
                           status_counts=stats.get("status_counts"), seconds=duration, drain=drain,
                           gaps=len(bad))


# ---------------------------------------------------------------------------------------------------------------
# Two destinations killed

def vendor_record(line):
    """(run, ordinal) of a line of a vendor's `/_mock/logs`: an OTLP log record (its `eventName`, attribute `i`) or
    a PostHog event (`event`, property `i`); None for anything else."""
    if line.get("vendor") == "posthog":
        i = (line.get("properties") or {}).get("i")
        name = line.get("event") or ""
    elif "logRecord" in line:
        record = line["logRecord"]
        name = record.get("eventName") or (record.get("body") or {}).get("stringValue") or ""
        i = next((a["value"].get("intValue") for a in record.get("attributes") or [] if a.get("key") == "i"), None)
    else:
        return None
    if i is None:
        return None
    return (name[:-len("-critical")] if name.endswith("-critical") else name), int(i)


def two_destinations(work):
    """BEHAVIOUR D16, D17: one store, two destinations (`outbox emit --to`: OTLP to one mock, PostHog to another,
    each with its own faults), killed with SIGKILL during delivery round after round; at the end each destination
    holds every event of every run once among its unique logs, the same events at both, and its duplicates are
    no more than the logs whose answer was lost."""
    part = "dests"
    scenario = {"seed": SEED, "description": "torture two destinations: lost acknowledgements, 503s, slow answers",
                "rules": [
                    {"match": {"probability": 0.08}, "action": "drop_after_body"},
                    {"match": {"probability": 0.2}, "respond": {"status": 503}},
                    {"match": {"probability": 0.25}, "respond": {"delay_ms": 120}},
                ]}
    mocks = {"ops": Mock(work, "dests-ops", scenario), "product": Mock(work, "dests-product", dict(scenario, seed=SEED + 1))}
    wires = {"ops": "otlp", "product": "posthog"}
    phase_file = os.path.join(work, "dests.phase")
    env = dict(os.environ, OUTBOX_PRODUCT_API_KEY="phc_torture", OUTBOX_TESTING_PHASE_FILE=phase_file)
    to = ["--to", f"ops=otlp,endpoint={mocks['ops'].url}", "--to", f"product=posthog,endpoint={mocks['product'].url}"]
    rounds = DEST_ROUNDS
    stores = []
    procs = {name: [] for name in mocks}   # each mock's (spawn, end, kind) on its own time base
    kills = natural = in_flight = 0
    failed_exits = []
    err_path = os.path.join(work, "dests.emit.err")
    out_path = os.path.join(work, "dests.emit.out")
    start = time.monotonic()
    fd = os.open(phase_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        n = -1
        while kills < rounds and n + 1 < 2 * rounds:
            n += 1
            if n % ROUNDS_PER_STORE == 0:
                stores.append(os.path.join(work, f"dests-{len(stores)}.outbox"))
            os.pwrite(fd, b"0000", 0)
            spawn = {name: mock.ms() for name, mock in mocks.items()}
            proc = subprocess.Popen(
                [OUTBOX, "emit", "--store", stores[-1], "--count", str(rng.randint(200, 800)), "--name-prefix", f"r{n}"]
                + to + ["--testing", "--interval", "0.05", "--batch-size", str(rng.choice([10, 25, 50])),
                        "--retry-intervals", "0.05,0.1,0.2", "--critical-every", "9", "--wait-delivered",
                        "--timeout", "10"],
                stdout=open(out_path, "w"), stderr=open(err_path, "w"), env=env)
            # Killed during delivery: after a random earliest moment, the first instant a request (to either
            # destination) is in flight; at PHASE_WAIT_S anyway.
            not_before = time.monotonic() + rng.uniform(0.0, 0.8)
            deadline = not_before + PHASE_WAIT_S
            while proc.poll() is None and time.monotonic() < deadline:
                if time.monotonic() >= not_before and os.pread(fd, 4, 0)[3:4] == b"1":
                    break
                time.sleep(0.0003)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                in_flight += os.pread(fd, 4, 0)[3:4] == b"1"
                for name, mock in mocks.items():
                    procs[name].append((spawn[name], mock.ms(), "kill"))
            else:
                natural += 1
                for name, mock in mocks.items():
                    procs[name].append((spawn[name], mock.ms(), "exit"))
                if proc.returncode not in (0, 1):
                    with open(err_path) as f:
                        failed_exits.append((n, proc.returncode, " ".join(f.read().split())[-300:]))
        for mock in mocks.values():
            mock.set_scenario({"seed": 1, "rules": []})
        drains = [run_emit(store, 0, extra=to + ["--testing", "--interval", "0.05", "--wait-delivered",
                                                  "--timeout", "300"], env=env) for store in stores]
        records = {name: [vendor_record(l) for l in mock.logs()] for name, mock in mocks.items()}
        stats = {name: mock.stats()["vendors"][wires[name]] for name, mock in mocks.items()}
        exchanges = {name: mock.exchanges() for name, mock in mocks.items()}
    finally:
        os.close(fd)
        for mock in mocks.values():
            mock.stop()
    duration = elapsed(start)
    check(part, f"{rounds} rounds of kill -9 with two destinations", kills == rounds,
          f"{kills} kills in {kills + natural} processes ({natural} ended by themselves), {in_flight} with a request "
          f"in flight; {duration:.0f} s")
    check(part, "every process that ended by itself exited 0 or 1", not failed_exits, f"{failed_exits[:3]}")
    bad_drains = [(code, out) for code, out, _ in drains
                  if not (code == 0 and out is not None and out["pending"] == 0 and out["evicted"] == 0
                          and out["dead_lettered"] == 0
                          and all(d["pending"] == 0 and d["dead_letters"] == 0 for d in out["destinations"].values()))]
    check(part, "final drain: nothing pending, evicted or dead-lettered at either destination", not bad_drains,
          f"{len(stores)} stores" + (f"; {bad_drains[:3]}" if bad_drains else ""),
          stderr="".join(err for _, _, err in drains[:1]))
    figures = {}
    runs = {}
    for name in mocks:
        logs = [r for r in records[name] if r is not None]
        by_run = {}
        for run, i in logs:
            by_run.setdefault(run, []).append(i)
        runs[name] = by_run
        bad = [r for r, o in by_run.items() if not gap_free(o)]
        check(part, f"{name} ({wires[name]}): every run's ordinals are a gap-free prefix, each once", not bad and logs,
              f"{len(by_run)} runs, {len(logs)} logs" + (f"; gaps or repeats in {sorted(bad)[:10]}" if bad else ""))
        check(part, f"{name}: the mock's unique events are the logs checked", stats[name]["events_unique"] == len(logs),
              f"events_unique {stats[name]['events_unique']}, lines {len(logs)}")
        dup_total = stats[name]["events_duplicate"]
        bound = unacknowledged_logs(exchanges[name], procs[name])
        check(part, f"{name}: duplicates at most the logs of requests whose answer was lost (lost acknowledgement, "
              "or in flight or answered <= 1 s before a kill)", dup_total <= bound,
              f"{dup_total} duplicates, {bound} logs unacknowledged")
        figures[name] = dict(wire=wires[name], logs=len(logs), runs=len(by_run), duplicates=dup_total,
                             unacknowledged=bound, requests=stats[name]["requests"])
    same = {r: (sorted(runs["ops"].get(r, [])), sorted(runs["product"].get(r, [])))
            for r in set(runs["ops"]) | set(runs["product"])}
    differ = sorted(r for r, (a, b) in same.items() if a != b)
    check(part, "both destinations hold the same events of every run (a log is stored once, D17)", not differ,
          f"{len(same)} runs" + (f"; differ in {differ[:10]}" if differ else ""))
    report["dests"] = dict(rounds=rounds, kills=kills, in_flight=in_flight, natural=natural, stores=len(stores), seconds=duration,
                           destinations=figures)


# ---------------------------------------------------------------------------------------------------------------
# Full disk

def full_disk(work):
    part = "disk"
    if os.geteuid() != 0:
        check(part, "skipped: mounting a tmpfs needs root", True, "not root")
        report["disk"] = {"skipped": "not root"}
        return
    mnt = os.path.join(work, "fulldisk")
    os.makedirs(mnt)
    size_mib = 4
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700", "tmpfs", mnt],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        check(part, "skipped: cannot mount a tmpfs", True, mounted.stderr.strip())
        report["disk"] = {"skipped": mounted.stderr.strip()}
        return
    mock = Mock(work, "disk", {"seed": 1, "rules": []})
    store = os.path.join(mnt, "disk.outbox")
    figures = {"size_mib": size_mib}
    try:
        # 1. Track well beyond the disk (the cap is above the filesystem's size): S7's full disk is S2's eviction.
        n1 = 40000
        code, out, err = run_emit(store, n1, None, "fd1", ["--payload-bytes", "200", "--critical-every", "10",
                                                           "--max-storage-bytes", str(64 << 20)])
        st = os.statvfs(mnt)
        free = st.f_bavail * st.f_frsize
        figures["fill"] = out
        figures["free_after_fill"] = free
        check(part, "tracking onto a full disk runs to its end", code == 0 and out is not None,
              f"exit {code}", stderr=err)
        if out is None:
            return
        accounted = out["pending"] + out["evicted"] + out["rejected"] + out["delivered"] + out["dead_lettered"] + out["expired"]
        check(part, "tracked = pending + evicted + rejected, nothing unaccounted", accounted == n1,
              f"{n1} tracked: pending {out['pending']}, evicted {out['evicted']}, rejected {out['rejected']}")
        check(part, "the disk did fill up (evictions happened)", out["evicted"] > 0,
              f"evicted {out['evicted']}, {free} bytes free after")
        # 2. Fill what is left, then deliver everything kept while the disk stays full.
        filler = os.path.join(mnt, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        st = os.statvfs(mnt)
        figures["free_with_filler"] = st.f_bavail * st.f_frsize
        code, out2, err = run_emit(store, 0, mock, "fd2", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                           "--timeout", "120", "--max-storage-bytes", str(64 << 20)])
        figures["deliver"] = out2
        stats = mock.stats()
        kept = out["pending"]
        check(part, "with the disk still full, everything kept is delivered",
              code == 0 and out2 is not None and out2["pending"] == 0 and stats["logs_unique"] == kept,
              f"exit {code}, kept {kept}, mock unique {stats['logs_unique']}, {out2}", stderr=err)
        logs = mock.logs()
        fd1 = ordinals_by_run(logs, "fd1").get("fd1", [])
        # Eviction takes the oldest normal logs first: the kept normal logs are the newest ones.
        normal = sorted(ordinal(l) for l in logs if l.get("name") == "fd1")
        critical = sum(1 for l in logs if l.get("name") == "fd1-critical")
        check(part, "the kept logs are distinct, the newest normal ones (S2: the oldest normal evicted first)",
              len(set(fd1)) == len(fd1) and bool(normal)
              and normal == [o for o in range(normal[0], n1) if o % 10 != 9],
              f"{len(fd1)} kept: normal ordinals {normal[0] if normal else '-'}..{normal[-1] if normal else '-'}, {critical} critical")
        # 2b. Still full: new logs go on being tracked and delivered (deleting delivered logs makes room, S7).
        n2 = 1000
        before = mock.stats()["logs_unique"]
        code, out2b, err = run_emit(store, n2, mock, "fd2b", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                              "--timeout", "120", "--max-storage-bytes", str(64 << 20)])
        figures["track_while_full"] = out2b
        got = mock.stats()["logs_unique"] - before
        ok = code == 0 and out2b is not None and out2b["pending"] == 0 and \
            out2b["delivered"] + out2b["evicted"] + out2b["rejected"] + out2b["dead_lettered"] + out2b["expired"] == n2 \
            and got == out2b["delivered"]
        check(part, "with the disk still full, new logs are tracked and delivered, every one accounted for", ok,
              f"exit {code}, {n2} tracked: {out2b}, mock got {got}", stderr=err)
        # 3. Free the disk and go on.
        os.remove(filler)
        n3 = 500
        code, out3, err = run_emit(store, n3, mock, "fd3", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                            "--timeout", "60", "--max-storage-bytes", str(64 << 20)])
        figures["after"] = out3
        logs = mock.logs()
        fd3 = ordinals_by_run(logs, "fd3").get("fd3", [])
        check(part, "disk freed: new logs are tracked and delivered, all of them",
              code == 0 and out3 is not None and out3["pending"] == 0 and gap_free(fd3) and len(fd3) == n3,
              f"exit {code}, {out3}, {len(fd3)} delivered")
        check(part, "nothing was delivered twice", mock.stats()["logs_duplicate"] == 0,
              f"duplicates {mock.stats()['logs_duplicate']}")
    finally:
        mock.stop()
        subprocess.run(["umount", mnt])
        report["disk"] = figures


# ---------------------------------------------------------------------------------------------------------------
# Clock jumps

def write_offset(path, ms):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{ms}\n")
    os.replace(tmp, path)


def clock_jumps(work):
    part = "clock"
    figures = {}
    offset_file = os.path.join(work, "clock-offset")
    write_offset(offset_file, 0)
    # 503s from 1 s to 5.5 s: retries are scheduled, and logs wait, while the wall clock is stepped.
    scenario = {"seed": 3, "rules": [{"match": {"after_s": 1.0, "until_s": 5.5}, "respond": {"status": 503}}]}
    mock = Mock(work, "clock", scenario)
    store = os.path.join(work, "clock.outbox")
    n, rate = 300, 60.0
    steps = [(1.5, DAY_MS), (2.3, -DAY_MS), (3.1, 25 * DAY_MS), (3.9, -25 * DAY_MS), (4.7, 26 * DAY_MS), (6.0, 0)]
    try:
        mono_start = time.monotonic()
        proc = subprocess.Popen(emit_args(store, n, mock, "cj",
                                          ["--rate", str(rate), "--testing", "--interval", "0.3",
                                           "--retry-intervals", "1,1,1,1,1,1,1,1", "--wait-delivered",
                                           "--timeout", "60", "--testing-clock-offset-file", offset_file]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for at, ms in steps:
            time.sleep(max(0.0, at - elapsed(mono_start)))
            write_offset(offset_file, ms)
        out_text, err_text = proc.communicate(timeout=120)
        out = json.loads(out_text.strip().splitlines()[-1]) if out_text.strip() else None
        figures["run"] = out
        logs = mock.logs()
        stats = mock.stats()
        cj = ordinals_by_run(logs, "cj").get("cj", [])
        check(part, "steps of +-1 day and +-25 days while logs wait and retries are scheduled: nothing lost, nothing twice",
              proc.returncode == 0 and out is not None and gap_free(cj) and len(cj) == n
              and stats["logs_duplicate"] == 0 and out["pending"] == 0,
              f"exit {proc.returncode}, {len(cj)}/{n} delivered, {stats['logs_duplicate']} duplicates, {out}")
        check(part, "a wall step alone expires nothing (S4: boot-time age)", out is not None and out["expired"] == 0,
              f"expired {out and out['expired']}")
        # Retries: each batch's attempts, one after another, follow the monotonic clock (1 s, randomised to 0.5-1 s).
        attempts = {}
        for ex in mock.exchanges():
            ids = ex.get("log_ids") or []
            if ids:
                attempts.setdefault(ids[0], []).append(ex["at"])
        gaps = [b - a for at in attempts.values() for a, b in zip(at, at[1:])]
        retried = sum(1 for at in attempts.values() if len(at) > 1)
        figures["retry_gaps_ms"] = (min(gaps), max(gaps)) if gaps else None
        check(part, "retry timers follow the monotonic clock across the steps",
              retried > 0 and all(400 <= g <= 1600 for g in gaps),
              f"{retried} batches retried, gaps {min(gaps) if gaps else '-'}-{max(gaps) if gaps else '-'} ms (expected 500-1000 ms + latency)")
        # A9: with the server's time anchored on the boot clock, every timestamp is the capture's true time.
        # The first log went out before any step and before the engine learned the server's clock: its timestamp
        # is the true time of the first capture; emit paces the others at `rate` on the real clock.
        worst = 0
        first = next((iso_ms(l["timestamp"]) for l in logs if run_of(l) == "cj" and ordinal(l) == 0), None)
        for log in logs:
            if run_of(log) != "cj" or first is None:
                continue
            expected = first + ordinal(log) / rate * 1000
            worst = max(worst, abs(iso_ms(log["timestamp"]) - expected))
        figures["a9_worst_ms"] = worst
        check(part, "timestamps corrected per A9 (within 1.5 s of the true capture time, steps of a day and more)",
              worst <= 1500, f"worst error {worst / 1000:.3f} s")
        # The control: a log captured with the wall clock a day ahead and sent in a process's first request, before
        # any server time is known, carries that day (SPEC A9 corrects only once the server's clock is known): the
        # offset file does move the engine's wall clock, so the checks above do test something.
        write_offset(offset_file, DAY_MS)
        run_emit(store, 1, None, "cj-control", ["--testing-clock-offset-file", offset_file])
        write_offset(offset_file, 0)
        sent = time.time() * 1000
        run_emit(store, 0, mock, "none", ["--testing", "--interval", "0.1", "--wait-delivered", "--timeout", "30"])
        control = [iso_ms(l["timestamp"]) for l in mock.logs() if run_of(l) == "cj-control"]
        check(part, "control: the offset file moves the engine's wall clock (a log captured a day ahead, sent first)",
              len(control) == 1 and abs(control[0] - sent - DAY_MS) < 60_000,
              f"timestamp - now = {((control[0] - sent) / 3_600_000) if control else float('nan'):.2f} h")
        # Logs written at the true time, delivered by a process whose wall clock is 26 days ahead, then behind.
        for label, ms in [("ahead", 26 * DAY_MS), ("behind", -26 * DAY_MS)]:
            write_offset(offset_file, 0)
            prefix = f"cj-{label}"
            run_emit(store, 50, None, prefix, ["--testing-clock-offset-file", offset_file])
            write_offset(offset_file, ms)
            code, out2, err = run_emit(store, 0, mock, "none",
                                       ["--testing", "--interval", "0.1", "--wait-delivered", "--timeout", "30",
                                        "--testing-clock-offset-file", offset_file])
            got = ordinals_by_run(mock.logs(), prefix).get(prefix, [])
            check(part, f"a store reopened with the wall clock 26 days {label}: nothing expired, all delivered",
                  code == 0 and out2 is not None and out2["expired"] == 0 and gap_free(got) and len(got) == 50,
                  f"exit {code}, {out2}, {len(got)}/50 delivered")
        check(part, "sessions follow the monotonic clock",
              True, "emit tracks no lifecycle: covered by the Swift suite (see REPORT.md)")
    finally:
        mock.stop()
        report["clock"] = figures


def iso_ms(text):
    import datetime
    dt = datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return dt.timestamp() * 1000


# ---------------------------------------------------------------------------------------------------------------
# Corruption while stopped

def corruption(work):
    part = "corrupt"
    figures = {}
    mock = Mock(work, "corrupt", {"seed": 1, "rules": []})
    try:
        # a) Pages of a cleanly closed store overwritten.
        d = os.path.join(work, "pages")
        os.makedirs(d)
        store = os.path.join(d, "s.outbox")
        run_emit(store, 3000, None, "cp0", ["--payload-bytes", "100"])
        size = os.path.getsize(store)
        with open(store, "r+b") as f:
            for page in range(2, size // 4096, 3):
                f.seek(page * 4096 + 100)
                f.write(os.urandom(1500))
        figures["pages_db_bytes"] = size
        code, out, err = run_emit(store, 200, mock, "cp1", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                             "--timeout", "30", "--log-level", "error"])
        aside = [f for f in os.listdir(d) if ".corrupt-" in f]
        reports = err.count("the store was corrupt or unreadable")
        got = ordinals_by_run(mock.logs(), "cp1").get("cp1", [])
        check(part, "overwritten pages: the store is moved aside, the loss reported once, new logs delivered",
              code == 0 and aside and reports == 1 and gap_free(got) and len(got) == 200,
              f"exit {code}, aside {aside}, {reports} reports, {len(got)}/200 delivered", stderr=err)
        code, out, err = run_emit(store, 100, mock, "cp2", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                             "--timeout", "30", "--log-level", "error"])
        aside2 = [f for f in os.listdir(d) if ".corrupt-" in f]
        got = ordinals_by_run(mock.logs(), "cp2").get("cp2", [])
        check(part, "the next start works on the fresh store, reports nothing more",
              code == 0 and aside2 == aside and "corrupt" not in err and len(got) == 100,
              f"exit {code}, {len(got)}/100 delivered", stderr=err)
        # b) The WAL truncated while stopped (after a kill -9 left it), at a frame boundary and mid-frame.
        for label, cut in [("mid-frame", lambda s: s // 2 + 7), ("header", lambda s: 10)]:
            d = os.path.join(work, f"wal-{label}")
            os.makedirs(d)
            store = os.path.join(d, "s.outbox")
            prefix = f"wal{label[0]}"
            proc = subprocess.Popen(emit_args(store, 200000, None, prefix, ["--rate", "4000"]),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and (os.path.getsize(store + "-wal") if os.path.exists(store + "-wal") else 0) < 300_000:
                time.sleep(0.01)
            proc.kill()
            proc.wait()
            wal = os.path.getsize(store + "-wal")
            committed, committed_max = count_logs(store)
            # The commit mark (`<store>-mark`, the highest seq an append committed) as the kill left it: it is written
            # right after each commit, so a kill between the two leaves it one commit behind (`mark_behind`, logs that
            # a power loss could lose unreported all the same).
            mark = read_mark(store)
            os.truncate(store + "-wal", cut(wal))
            surviving, _ = count_logs(store)
            lost = committed - surviving
            mark_behind = committed_max - mark if mark is not None else None
            code, out, err = run_emit(store, 0, mock, "none", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                                "--timeout", "60", "--log-level", "error"])
            got = ordinals_by_run(mock.logs(), prefix).get(prefix, [])
            reports = err.count("WAL was cut short")
            reported = out.get("lost_at_open") if out else None
            # SQLite reads a cut WAL as a torn tail (what a power loss leaves): the frames after the last whole
            # commit are dropped and the database stays consistent, so nothing is corrupt to move aside. The commit
            # mark tells the engine how far the appends went: the logs of the dropped commits are reported once, with
            # their number (S7), and the next start reports nothing.
            code2, out2, err2 = run_emit(store, 0, mock, "none", ["--testing", "--interval", "0.1", "--wait-delivered",
                                                                   "--timeout", "30", "--log-level", "error"])
            again = out2.get("lost_at_open") if out2 else None
            check(part, f"WAL truncated ({label}, {wal} -> {cut(wal)} bytes): opens, delivers a gap-free prefix, "
                        "reports the lost logs once with their count, the next start reports nothing",
                  code == 0 and out is not None and out["pending"] == 0 and gap_free(got) and len(got) == surviving
                  and lost > 0 and mark_behind is not None and reported == lost - mark_behind and reports == 1
                  and code2 == 0 and again == 0 and "WAL was cut short" not in err2,
                  f"exit {code}, {len(got)} of {committed} committed delivered, {lost} lost with the cut frames, "
                  f"{reported} reported as lost ({reports} report), mark behind by {mark_behind}; "
                  f"next start: exit {code2}, {again} reported",
                  stderr=err + err2)
            figures[f"wal_{label}"] = dict(wal=wal, cut=cut(wal), committed=committed, delivered=len(got),
                                           lost=lost, reported=reported, mark_behind=mark_behind, reported_next=again)
        # c) A newer schema: refused, untouched.
        d = os.path.join(work, "newer")
        os.makedirs(d)
        store = os.path.join(d, "s.outbox")
        run_emit(store, 100, None, "nw")
        con = sqlite3.connect(store)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        con.execute(f"PRAGMA user_version = {version + 7}")
        con.close()
        before = {f: digest(os.path.join(d, f)) for f in os.listdir(d)}
        code, out, err = run_emit(store, 10, None, "nw2")
        after = {f: digest(os.path.join(d, f)) for f in os.listdir(d)}
        check(part, "a store of a newer schema is refused (storeTooNew) and left untouched",
              code != 0 and ("newer" in err or "storeTooNew" in err) and before == after,
              f"exit {code}, {err.strip()[-160:]}, files {'unchanged' if before == after else 'CHANGED'}")
        figures["newer"] = dict(version=version + 7, message=err.strip()[-200:])
    finally:
        mock.stop()
        report["corrupt"] = figures


def key_rotations(work):
    """SPEC K1, R8: a sealed store's key rotated by `outbox emit --new-store-key-file` while it tracks, the process
    killed with SIGKILL at a random moment of the rotation, ROTATIONS times in a row. After each kill exactly one of
    the two keys opens the store (the old one until the rotation's first transaction committed, the new one from
    then on); at the end every log of every round is delivered, each round's a gap-free prefix, and the first
    20 000 all there."""
    part = "rotate"
    d = os.path.join(work, "rotate")
    os.makedirs(d)
    store = os.path.join(d, "s.outbox")

    def key_file(n):
        path = os.path.join(d, f"k{n}.key")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(32))
        return path

    def opens(key):
        """Whether `key` opens the store, and whether a rotation is then under way (or the error)."""
        proc = subprocess.run([OUTBOX, "status", "--store", store, "--store-key-file", key], capture_output=True,
                              text=True, timeout=60)
        if proc.returncode != 0:
            return False, proc.stderr
        return True, json.loads(proc.stdout.strip().splitlines()[-1]).get("rotating_store_key")

    # A cap far above the ~40 000 logs of the part: an eviction (S2) would look like a loss.
    cap = ["--max-storage-bytes", str(256 << 20)]
    current = key_file(0)
    code, out, err = run_emit(store, 20000, None, "rt", ["--store-key-file", current, "--payload-bytes", "100"] + cap)
    check(part, "20 000 logs tracked into a sealed store", code == 0 and out and out["tracked"] == 20000,
          f"exit {code}", stderr=err)
    kills, neither, both, finished, mid_rotation, invalid = 0, 0, 0, 0, 0, []
    for n in range(1, ROTATIONS + 1):
        new = key_file(n)
        proc = subprocess.Popen(emit_args(store, 200, None, f"r{n}", ["--store-key-file", current,
                                                                       "--new-store-key-file", new] + cap),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.0, 0.4))
        if proc.poll() is None:
            proc.kill()
            kills += 1
        else:
            finished += 1
        _, perr = proc.communicate()
        if proc.returncode not in (0, -signal.SIGKILL):
            invalid.append(f"round {n}: exit {proc.returncode}: {perr.strip()[-200:]}")
        new_opens, new_state = opens(new)
        old_opens, _ = opens(current)
        if new_opens and new_state is True:
            mid_rotation += 1
        if new_opens and old_opens:
            both += 1
        elif not new_opens and not old_opens:
            neither += 1
            invalid.append(f"round {n}: neither key opens the store: {new_state.strip()[-200:]}")
        if new_opens:
            current = new
    check(part, f"{ROTATIONS} rotations, {kills} killed: after each, exactly one key opens the store",
          neither == 0 and both == 0 and not invalid and mid_rotation > 0,
          f"{kills} killed ({mid_rotation} with the rotation under way, resumed by the next), {finished} finished, "
          f"{neither} opened by neither key, {both} by both; {invalid[:3]}")
    mock = Mock(work, "rotate", {"seed": 1, "rules": []})
    try:
        code, out, err = run_emit(store, 0, mock, "none", ["--store-key-file", current, "--testing", "--interval", "0.1",
                                                            "--wait-delivered", "--timeout", "120", "--log-level", "error"]
                                  + cap)
        by_run = ordinals_by_run(mock.logs())
        rounds = [by_run.get(f"r{n}", []) for n in range(1, ROTATIONS + 1)]
        prefixes = all(gap_free(got) for got in rounds)
        first = by_run.get("rt", [])
        check(part, "everything delivered with the last key: the 20 000 and each round's gap-free prefix",
              code == 0 and out and out["pending"] == 0 and out["evicted"] == 0 and len(first) == 20000
              and gap_free(first) and prefixes,
              f"exit {code}, {len(first)}/20000 of the first, {sum(map(len, rounds))} of the rounds "
              f"({'all gap-free' if prefixes else 'GAPS'})", stderr=err)
    finally:
        mock.stop()
    report["rotate"] = dict(rotations=ROTATIONS, killed=kills, killed_mid_rotation=mid_rotation, finished=finished)


def read_mark(store):
    """The seq in the commit mark `<store>-mark` (16 bytes: the seq, then the seq XOR a check word, little-endian)."""
    try:
        with open(store + "-mark", "rb") as f:
            data = f.read(16)
    except OSError:
        return None
    if len(data) != 16:
        return None
    seq, check_word = struct.unpack("<QQ", data)
    return seq if seq ^ 0x6F757462_6F786D6B == check_word else None


def count_logs(store):
    """Logs a killed engine left committed (database + WAL), and their highest seq, counted on a copy so the
    original stays as it is."""
    d = tempfile.mkdtemp(prefix="outbox-torture-count-")
    try:
        for suffix in ["", "-wal"]:
            if os.path.exists(store + suffix):
                shutil.copy(store + suffix, os.path.join(d, "s" + suffix))
        con = sqlite3.connect(os.path.join(d, "s"))
        try:
            try:
                count, high = con.execute("SELECT count(*), coalesce(max(seq), 0) FROM logs").fetchone()
            except sqlite3.OperationalError:
                # A WAL cut at its header before any checkpoint leaves the empty file: no schema, no logs.
                return 0, 0
            return count, high
        finally:
            con.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# Soak

def soak(work):
    part = "soak"
    scenario = {"seed": 5, "rules": [
        {"match": {"probability": 0.02}, "action": "drop_after_body"},
        {"match": {"probability": 0.1}, "respond": {"status": 503}},
        {"match": {"probability": 0.1}, "respond": {"delay_ms": 200}},
    ]}
    mock = Mock(work, "soak", scenario)
    store = os.path.join(work, "soak.outbox")
    rate = 200
    n = SOAK_S * rate
    samples = []
    try:
        proc = subprocess.Popen(emit_args(store, n, mock, "soak",
                                          ["--rate", str(rate), "--testing", "--interval", "1", "--critical-every", "50",
                                           "--retry-intervals", "0.5,1,2,2,2,2,2,2", "--payload-bytes", "300",
                                           "--wait-delivered", "--timeout", "120"]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        next_at = start
        while proc.poll() is None and elapsed(start) < SOAK_S:
            next_at += 1.0
            time.sleep(max(0.0, next_at - time.monotonic()))
            try:
                rss = 0
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss = int(line.split()[1]) * 1024
                fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
            except OSError:
                break
            wal = os.path.getsize(store + "-wal") if os.path.exists(store + "-wal") else 0
            samples.append((round(elapsed(start), 1), rss, fds, wal))
        out_text, err_text = proc.communicate(timeout=300)
        out = json.loads(out_text.strip().splitlines()[-1]) if out_text.strip() else None
        logs = mock.logs()
        got = ordinals_by_run(logs, "soak").get("soak", [])
        check(part, f"{SOAK_S} s at {rate} logs/s with faults: everything delivered",
              proc.returncode == 0 and out is not None and gap_free(got) and len(got) == n,
              f"exit {proc.returncode}, {len(got)}/{n}, {out}")
        base = next((s for s in samples if s[0] >= min(60, SOAK_S / 2)), samples[0] if samples else None)
        end = samples[-1] if samples else None
        if base and end:
            for i, label, slack in [(1, "RSS", 1 << 20), (2, "descriptors", 4), (3, "WAL", 1 << 20)]:
                ok = abs(end[i] - base[i]) <= max(0.1 * base[i], slack)
                check(part, f"{label} flat (end within 10 % or {'4' if i == 2 else '1 MiB'} of t={base[0]:.0f} s)", ok,
                      f"{base[i]} -> {end[i]}, max {max(s[i] for s in samples)}")
        else:
            check(part, "samples taken", False, "no samples")
        write_svg(os.path.join(OUT_DIR, "soak.svg"), samples)
        report["soak"] = dict(rate=rate, seconds=SOAK_S, samples=samples, base=base, end=end, out=out,
                              stats=mock.stats())
    finally:
        mock.stop()


def write_svg(path, samples):
    width, height, pad = 720, 150, 40
    series = [(1, "RSS (MiB)", 1 / (1 << 20), "#1f77b4"), (2, "descriptors", 1, "#d62728"),
              (3, "WAL (MiB)", 1 / (1 << 20), "#2ca02c")]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{len(series) * (height + 20) + 20}" '
             f'font-family="sans-serif" font-size="11">']
    t_max = max((s[0] for s in samples), default=1) or 1
    for k, (i, label, scale, color) in enumerate(series):
        y0 = 20 + k * (height + 20)
        values = [s[i] * scale for s in samples]
        v_max = max(values, default=1) * 1.1 or 1
        parts.append(f'<rect x="{pad}" y="{y0}" width="{width - 2 * pad}" height="{height}" fill="none" stroke="#999"/>')
        parts.append(f'<text x="{pad + 4}" y="{y0 + 12}">{label}: max {max(values, default=0):.2f}</text>')
        parts.append(f'<text x="2" y="{y0 + height}">0</text><text x="2" y="{y0 + 10}">{v_max:.1f}</text>')
        points = " ".join(f"{pad + (s[0] / t_max) * (width - 2 * pad):.1f},{y0 + height - (v / v_max) * height:.1f}"
                          for s, v in zip(samples, values))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>')
    parts.append(f'<text x="{width - pad - 60}" y="{len(series) * (height + 20) + 15}">t = {t_max:.0f} s</text></svg>')
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# ThreadSanitizer: the whole suite, so that the torture report also says whether any data race was seen

def tsan(work):
    """`scripts/sanitize.sh thread`: builds everything with --sanitize=thread in .build-tsan and runs every test there,
    the CLI, the mock and the crash child being sanitized builds too; every process writes its reports to a file."""
    env = dict(os.environ)
    env["OUTBOX_TIME_SCALE"] = os.environ.get("TORTURE_TSAN_TIME_SCALE", "4")
    start = time.monotonic()
    proc = subprocess.run([os.path.join(ROOT, "scripts", "sanitize.sh"), "thread"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout
    seconds = elapsed(start)
    summary = re.search(r"sanitize thread: build (\d+) s, tests (\d+) s, test exit status (\d+), (\d+) report file", out)
    swift_testing = re.search(r"Test run with (\d+) tests? (?:in \d+ suites? )?passed", out)
    swift_testing_failed = re.search(r"Test run with (\d+) tests? (?:in \d+ suites? )?failed", out)
    xctest = re.findall(r"Executed (\d+) tests?, with (\d+) failures?", out)
    reports = [line.strip() for line in out.splitlines() if "SUMMARY: ThreadSanitizer" in line]
    figures = {"seconds": round(seconds), "exit": proc.returncode,
               "build_s": int(summary.group(1)) if summary else None,
               "tests_s": int(summary.group(2)) if summary else None,
               "report_files": int(summary.group(4)) if summary else None,
               "swift_testing_tests": int((swift_testing or swift_testing_failed).group(1)) if (swift_testing or swift_testing_failed) else None,
               "xctest_tests": int(xctest[-1][0]) if xctest else None,
               "xctest_failures": int(xctest[-1][1]) if xctest else None,
               "summaries": reports[:20],
               "suppressions": [l.strip() for l in open(os.path.join(ROOT, "scripts", "tsan.supp"))
                                if l.strip() and not l.startswith("#")]}
    report["tsan"] = figures
    check("tsan", "the suite builds with --sanitize=thread", summary is not None, f"build {figures['build_s']} s",
          stderr=out[-2000:] if summary is None else "")
    check("tsan", "every test passes under ThreadSanitizer", summary is not None and summary.group(3) == "0",
          f"tests {figures['tests_s']} s, Swift Testing {figures['swift_testing_tests']}, XCTest {figures['xctest_tests']}"
          f" ({figures['xctest_failures']} failures)", stderr=out[-2000:])
    check("tsan", "no ThreadSanitizer report from any process", figures["report_files"] == 0,
          f"{figures['report_files']} report files" + (f": {reports[:3]}" if reports else ""))


# ---------------------------------------------------------------------------------------------------------------
# The report

def notes():
    """The findings and limits that hold for every run (REPORT.md's last section)."""
    return ["", "## What the runs found, and the limits of the checks", "",
              "- **A cut WAL lost commits without a report; now it is reported.** SQLite reads a WAL cut short "
              "(mid-frame, or its header) as the torn tail a power loss leaves: it drops the frames after the last "
              "whole commit, the database stays consistent and `quick_check` passes, so S7 has nothing to move aside. "
              "The store now keeps a commit mark beside the file (`<store>-mark`: the highest seq an append committed, "
              "one unsynced `pwrite` per append transaction) and compares it at open with the highest seq the database "
              "ever held (a meta value raised in the transaction of any delete that takes the highest row): the logs of the "
              "dropped commits are reported once, as an error log and `lost_at_open` in the status, with their "
              "number (the figures above, `reported` against `lost`). Limit: a kill between a commit and its mark "
              "leaves the mark one commit behind (`mark_behind`), and those logs, if the WAL is then cut, are lost "
              "unreported — as they would be after a power loss that took the mark's write.",
              "- **A log captured during a wall-clock step kept the step when the step was undone before its batch "
              "went out; now it is corrected** (SPEC A9). The engine compared the server's clock with the wall clock "
              "at the send, and the clocks agreed again by then; it now compares with the log's wall time at its "
              "capture (the server's time anchored on the boot clock, minus the log's age). The clock part met it "
              "only on a loaded host, where the 503s pushed a batch of the +1 d step past the step back to 0 "
              "(worst error 86 400 s); `WireEncodingTests` replays it.",
              "- **SPEC T4 and R5 shape the driver, not the engine.** An install admits 200 event names, so the crash "
              f"rounds move to a fresh store every {ROUNDS_PER_STORE} processes (each run has its own names). A batch "
              "that fails 4 attempts disables sending until a restart or the 30 min probe (R5): with 12 % failing "
              "requests that happens within minutes, so the soak gives 8 retries (its first version, with 3, ended "
              "disabled with 14 450 logs kept for the next start — by design, not a loss).",
              "- **Early kills leave a backlog**; near the cap an eviction would be a gap, so a process that is not "
              f"killed delivers any backlog above {DRAIN_ABOVE} logs, and the check \"no round evicted a log\" "
              "reads the engine's own eviction lines (info level).",
              "- **The gap-free prefix proves no hole, not no tail loss**: a run whose last committed logs vanished "
              "would still be a prefix. The kill -9 rounds cannot lose a committed tail by SQLite's WAL rules; the "
              "corruption checks show what happens when the WAL itself is damaged.",
              "- **Phases overlap**, so the phase file has one byte per phase; a kill counts in every phase under way.",
              "- **Runs without a log**: a process killed before its first commit (early kills aimed at tracking or "
              "at a commit of the backlog's deliveries) leaves no log of its run, an empty prefix; the number of "
              "runs checked counts only runs with at least one log delivered.",
              ]


def commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        # The run's own outputs (torture/) do not count as changes to the code under test.
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)torture"],
                               capture_output=True, text=True).stdout.strip()
        return (head or "?") + ("+changes" if dirty else "")
    except OSError:
        return "?"


def merged_parts(part_seconds):
    """torture/results.json: every part's last run (its checks, figures, settings, commit and date); the parts of
    this run replace theirs, the others stay as they last ran."""
    path = os.path.join(OUT_DIR, "results.json")
    try:
        with open(path) as f:
            parts = json.load(f)
    except (OSError, ValueError):
        parts = {}
    now, head = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), commit()
    for name in ONLY:
        parts[name] = {"ran_at": now, "commit": head, "seconds": round(part_seconds.get(name, 0)),
                       "settings": {"TORTURE_ROUNDS": ROUNDS, "TORTURE_DEST_ROUNDS": DEST_ROUNDS,
                                    "TORTURE_SOAK_S": SOAK_S, "TORTURE_SEED": SEED},
                       "checks": [[n, ok, detail] for part, n, ok, detail in results if part == name],
                       "figures": report.get(name)}
    with open(path, "w") as f:
        json.dump(parts, f, indent=1, sort_keys=True)
        f.write("\n")
    return {name: parts[name] for name in ALL_PARTS if name in parts}


def write_report(total_s, part_seconds):
    passed = sum(1 for r in results if r[2])
    failed = len(results) - passed
    parts = merged_parts(part_seconds)
    report.clear()
    report.update({name: part["figures"] for name, part in parts.items() if part.get("figures")})
    all_checks = [(name, n, ok, detail) for name, part in parts.items() for n, ok, detail in part["checks"]]
    all_passed = sum(1 for c in all_checks if c[2])
    lines = ["# make torture — report", "",
             f"Written by `scripts/torture/torture.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             + (f"this run: parts {', '.join(ONLY)}, {total_s / 60:.1f} min on this machine (2 cores, shared), "
                f"{passed} passed, {failed} failed. " if ONLY else "regenerated from torture/results.json. ")
             + f"**All parts as last run: {all_passed} passed, "
             f"{len(all_checks) - all_passed} failed.**", "",
             "| part | last run | commit | settings | minutes |", "|---|---|---|---|---|"]
    for name, part in parts.items():
        settings = ", ".join(f"{k}={v}" for k, v in part["settings"].items()
                             if (name == "crash" and k == "TORTURE_ROUNDS") or (name == "dests" and k == "TORTURE_DEST_ROUNDS") or (name == "soak" and k == "TORTURE_SOAK_S")
                             or k == "TORTURE_SEED")
        lines.append(f"| {name} | {part['ran_at']} | {part['commit']} | {settings} | {part['seconds'] / 60:.1f} |")
    lines += ["", "| part | check | result | detail |", "|---|---|---|---|"]
    for part, name, ok, detail in all_checks:
        lines.append(f"| {part} | {name} | {'ok' if ok else '**FAIL**'} | {detail.replace('|', '/')} |")
    c = report.get("crash")
    if c:
        lines += ["", "## Crash rounds", "",
                  f"{c['rounds']} rounds of `outbox emit` killed with SIGKILL, {ROUNDS_PER_STORE} processes per store (SPEC T4: 200 event names per install) (200–800 events each, 1500–2500 when aimed at tracking or a checkpoint; batches of 10/25/50, "
                  f"every 9th critical, a 4 MiB cap so that checkpoints come often) on one store against `outbox-mock` with 8 % lost "
                  f"acknowledgements, 20 % 503s and 25 % answers delayed 120 ms; {c['kills']} `kill -9`, "
                  f"{c['natural']} more processes ended by themselves before their phase came ({c['timed_out']} of them at their 10 s "
                  f"`--timeout` with logs left for the next round), {c['drains_between']} processes not killed delivered a backlog above "
                  f"{DRAIN_ABOVE} logs, {c['waited_out']} killed after waiting "
                  f"{PHASE_WAIT_S:.0f} s for their phase; {c['seconds']:.0f} s.", "",
                  "Kills per phase (read from `OUTBOX_TESTING_PHASE_FILE` right after each kill; phases overlap, so a "
                  "kill counts in each phase under way at that instant — a checkpoint always runs inside a commit):", "",
                  "| phase | kills while under way | kills where it was the innermost phase |", "|---|---|---|"]
        for p in PHASES:
            lines.append(f"| {p} | {c['kills_per_phase'][p]} | {c['primary'][p]} |")
        lines.append(f"| none (start-up, exit) | – | {c['primary']['none']} |")
        lines += ["", f"Final drain (no faults): {c['drain']}. Logs checked: **{c['logs']}** in {c['runs']} runs, "
                      f"{c['gaps']} runs with a gap. Requests: {c['requests']}, status mix {c['status_counts']}, "
                      f"faults {c['faults']}.", "",
                  f"Duplicates the mock counted: **{c['duplicates']}**, explained: " +
                  ", ".join(f"{k}: {v}" for k, v in c["explained"].items()) + f"; unexplained: {c['unexplained']}. "
                  "A duplicate is explained when the previous acceptance of the same log id was a lost acknowledgement "
                  "(`drop_after_body`), or was answered at most 1 s before a kill, or was still in flight at a kill "
                  "(the mock records a batch before a delayed answer goes out; a killed client never reads it). The sender "
                  f"of a request is the last process spawned at least {STARTUP_MS} ms before the mock read its head "
                  "(the rounds' processes run one after another); the mock may read a killed sender's request after "
                  "the kill, its bytes being in the socket already. \"In flight when its process exited\": a round "
                  "that ended by itself (everything delivered, or its `--timeout`) with a request still out, which "
                  "shutdown cancels (SPEC C8)."]
    t = report.get("dests")
    if t:
        lines += ["", "## Two destinations killed", "",
                  f"{t['rounds']} rounds of `outbox emit --to ops=otlp,… --to product=posthog,…` (200–800 events each, "
                  f"batches of 10/25/50, every 9th critical), each destination on an `outbox-mock` of its own with 8 % lost "
                  f"acknowledgements, 20 % 503s and 25 % answers delayed 120 ms (seeded apart), killed with SIGKILL "
                  f"after a random 0–0.8 s at the first instant a request was in flight (`OUTBOX_TESTING_PHASE_FILE`; "
                  f"{PHASE_WAIT_S:.0f} s at most): {t['kills']} kills, {t.get('in_flight', '?')} of them with a request in "
                  f"flight, {t['natural']} processes ended by themselves, "
                  f"{t['stores']} stores; then a drain without faults; {t['seconds']:.0f} s.", "",
                  "| destination | logs checked | runs | duplicates | logs whose answer was lost | requests |",
                  "|---|---|---|---|---|---|"]
        for name, f in t["destinations"].items():
            lines.append(f"| {name} ({f['wire']}) | {f['logs']} | {f['runs']} | {f['duplicates']} | "
                         f"{f['unacknowledged']} | {f['requests']} |")
        lines += ["", "Every log is checked by its run and ordinal at each destination: each once among the mock's "
                  "unique events, gap-free, the same at both. The mock records a vendor's requests without their log "
                  "ids, so duplicates are bounded by the logs of the requests whose answer the client never had "
                  "rather than matched one by one as in the crash rounds."]
    d = report.get("disk")
    if d:
        lines += ["", "## Full disk", "", f"A {d.get('size_mib', '?')} MiB tmpfs (root): " + json.dumps(d)]
    k = report.get("clock")
    if k:
        lines += ["", "## Clock jumps", "",
                  "`outbox emit --testing-clock-offset-file` stepped +1 d, −1 d, +25 d, −25 d, +26 d and back to 0 "
                  "at 1.5–6 s of a 5 s run at 60 logs/s, while the mock answered 503 from 1 s to 5.5 s (retries "
                  "every 0.5–1 s, logs waiting). Retry gaps seen (ms): " + str(k.get("retry_gaps_ms")) +
                  f"; worst timestamp error against the true capture time: {k.get('a9_worst_ms', 0) / 1000:.3f} s. "
                  "Sessions: `outbox emit` tracks no lifecycle (manual sessions, SPEC A2); session timeouts on the "
                  "monotonic clock are covered by the Swift suite's analytics tests with `ManualClock.jumpWall`.",
                  "", "Runs: " + json.dumps(k.get("run"))]
    r = report.get("corrupt")
    if r:
        lines += ["", "## Corruption while stopped", "", "```", json.dumps(r, indent=1), "```"]
    s = report.get("soak")
    if s:
        lines += ["", "## Soak", "",
                  f"{s['seconds']} s at {s['rate']} logs/s (300 bytes of padding, every 50th critical) with 2 % lost "
                  f"acknowledgements, 10 % 503s, 10 % slow answers; sampled every second. First-minute sample "
                  f"(t, RSS, fds, WAL bytes): {s['base']}; last: {s['end']}. Result: {s['out']}.", "",
                  "![RSS, descriptors and WAL size over the soak](soak.svg)", "",
                  "| t (s) | RSS (MiB) | fds | WAL (KiB) |", "|---|---|---|---|"]
        step = max(1, len(s["samples"]) // 20)
        for t, rss, fds, wal in s["samples"][::step]:
            lines.append(f"| {t:.0f} | {rss / (1 << 20):.1f} | {fds} | {wal / 1024:.0f} |")
    z = report.get("tsan")
    if z:
        lines += ["", "## ThreadSanitizer", "",
                  f"`make sanitize-thread` (`scripts/sanitize.sh thread`): the whole Swift suite built with "
                  f"`--sanitize=thread` in `.build-tsan` and run there; the CLI, `outbox-mock` and the crash child "
                  f"that tests spawn are sanitized builds too, and every process writes its reports to a file "
                  f"(`log_path`), so a child's report counts even when a test captured its stderr. Build "
                  f"{z.get('build_s')} s, tests {z.get('tests_s')} s (OUTBOX_TIME_SCALE=4 widens the suite's few "
                  f"wall-clock bounds); Swift Testing tests: {z.get('swift_testing_tests')}, XCTest tests: "
                  f"{z.get('xctest_tests')} ({z.get('xctest_failures')} failures). **Report files: "
                  f"{z.get('report_files')}.**", ""]
        if z.get("summaries"):
            lines += ["Reports:", ""] + [f"- `{line}`" for line in z["summaries"]] + [""]
        lines.append("Suppressions in `scripts/tsan.supp`: " + (", ".join(f"`{x}`" for x in z["suppressions"])
                     if z.get("suppressions") else "none (the file says why `Synchronization.Mutex` needs none)."))
    lines += notes()
    with open(os.path.join(OUT_DIR, "REPORT.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return passed, failed


def main():
    for binary in [OUTBOX, MOCK]:
        if not os.access(binary, os.X_OK):
            print(f"torture: {binary} is missing: run `swift build -c release --product outbox` and "
                  f"`--product outbox-mock` first (make torture does)", file=sys.stderr)
            return 2
    os.makedirs(OUT_DIR, exist_ok=True)
    work = tempfile.mkdtemp(prefix="outbox-torture-")
    start = time.monotonic()
    parts = {"crash": crash_rounds, "dests": two_destinations, "disk": full_disk, "clock": clock_jumps, "corrupt": corruption,
             "rotate": key_rotations, "soak": soak, "tsan": tsan}
    unknown = [name for name in ONLY if name not in parts]
    if unknown:
        print(f"torture: unknown part(s) in TORTURE_ONLY: {', '.join(unknown)} (parts: {', '.join(ALL_PARTS)})",
              file=sys.stderr)
        return 2
    part_seconds = {}
    try:
        for name in ONLY:
            t = time.monotonic()
            try:
                parts[name](work)
            except Exception as error:  # a part that breaks is a failed check, and the others still run
                import traceback
                traceback.print_exc()
                check(name, "ran to its end", False, f"{type(error).__name__}: {error}")
            part_seconds[name] = elapsed(t)
            print(f"     {name}: {elapsed(t):.0f} s", flush=True)
    finally:
        passed, failed = write_report(elapsed(start), part_seconds)
        if failed == 0 and os.environ.get("TORTURE_KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"torture: work files kept in {work}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
