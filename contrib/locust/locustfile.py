"""SPEC F7 (docs/BEHAVIOUR.md): `outbox fleet` across machines, with Locust as the coordinator.

A Locust user is a shard, not a device: each worker runs ONE `outbox fleet` shard as a child process (under `nice`),
devices `k·n … k·n + n - 1` for worker index k; the engines' own loops do the work. The shard's closing object (its
`summary.json`, with the delay histogram's pairs) goes to the master in a custom message; the master quits the run
itself once every shard reported, merges them (fleet_merge.py), writes `fleet-merged.json` and `fleet-merged.html`,
and exits 0 only when every shard index reported exactly once with `lost` 0 and `cross_mock_duplicates` 0. A worker
lost before it reported fails the run naming its shard (its stores went with it); Locust may hand its user to
another worker, which does not start that shard again.

    locust -f contrib/locust/locustfile.py --master --headless --expect-workers 2 -u 2 -r 2 \\
        --fleet-devices 500 --fleet-events 100 --fleet-endpoint http://LB:8080 \\
        --fleet-accounting-endpoint http://MOCK1:8081 --fleet-accounting-endpoint http://MOCK2:8082 --fleet-out DIR
    locust -f contrib/locust/locustfile.py --worker --master-host MASTER      # on each worker host
"""
import json
import os
import shlex
import shutil
import sys
import tempfile
import time

import gevent
from gevent import subprocess
from locust import User, constant, events, task
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet_merge  # noqa: E402

RESULT = "outbox_shard_result"


@events.init_command_line_parser.add_listener
def _(parser):
    group = parser.add_argument_group("outbox fleet shards (SPEC F7)")
    group.add_argument("--fleet-binary", default=os.environ.get("OUTBOX_CLI", "outbox"), help="the outbox CLI on workers")
    group.add_argument("--fleet-devices", type=int, default=100, help="devices per shard")
    group.add_argument("--fleet-events", type=int, default=100, help="events per device")
    group.add_argument("--fleet-endpoint", default="", help="the ingestion endpoint (a load balancer, a mock)")
    group.add_argument("--fleet-accounting-endpoint", action="append", default=[],
                       help="an outbox-mock whose /_mock/logs holds part of the run (repeatable)")
    group.add_argument("--fleet-args", default="", help="more `outbox fleet` arguments, one shell-quoted string")
    group.add_argument("--fleet-out", default="fleet-merged", help="where the master writes fleet-merged.json/.html")
    group.add_argument("--fleet-timeout", type=float, default=1800, help="seconds the master waits for every shard")


class Shard:
    """What this worker process runs: one shard at most, whatever Locust dispatches to it."""
    started = False
    process = None


@events.quitting.add_listener
def _(environment, **_kwargs):
    # The run is over (the master quit it): a shard still running stops with its worker.
    if Shard.process is not None and Shard.process.poll() is None:
        Shard.process.kill()


class FleetShard(User):
    wait_time = constant(3600)

    @task
    def run_shard(self):
        runner = self.environment.runner
        if Shard.started or not isinstance(runner, WorkerRunner):
            # A user handed over from a lost worker: its shard's stores are gone; the master fails the run.
            gevent.sleep(3600)
            return
        Shard.started = True
        options = self.environment.parsed_options
        index = runner.worker_index
        out = tempfile.mkdtemp(prefix=f"outbox-shard-{index}-")
        command = ["nice", "-n", "5", options.fleet_binary, "fleet", "--devices", str(options.fleet_devices),
                   "--events", str(options.fleet_events), "--device-offset", str(index * options.fleet_devices),
                   "--report", out, "--log-level", "error"]
        if options.fleet_endpoint:
            command += ["--endpoint", options.fleet_endpoint]
        for endpoint in options.fleet_accounting_endpoint:
            command += ["--accounting-endpoint", endpoint]
        command += shlex.split(options.fleet_args)
        started = time.monotonic()
        stderr = ""
        try:
            proc = Shard.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            _, stderr = proc.communicate()
            # 0: nothing lost; 1: something lost or seen by two mocks (the summary says what). Anything else is an
            # error of the shard's own (not an outbox-mock, bad arguments): no summary to merge.
            if proc.returncode not in (0, 1):
                raise RuntimeError(f"outbox fleet exited {proc.returncode}")
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
            summary["exit"] = proc.returncode
        except (OSError, ValueError, RuntimeError) as error:
            summary = {"error": f"{error}: {stderr.strip()[-300:]}"}
        finally:
            shutil.rmtree(out, ignore_errors=True)
        summary["shard"] = index
        summary["seconds"] = round(time.monotonic() - started, 1)
        runner.send_message(RESULT, summary)
        gevent.sleep(3600)


@events.init.add_listener
def _(environment, **_kwargs):
    if not isinstance(environment.runner, MasterRunner):
        return
    results = {}
    failures = []
    seen_workers = {}

    def on_result(environment, msg, **_kwargs):
        index = msg.data.get("shard")
        if index in results:
            failures.append(f"shard {index} reported twice")
        results[index] = msg.data
        print(f"outbox fleet shard {index}: {json.dumps({k: v for k, v in msg.data.items() if k not in ('delay_histogram', 'samples')})}",
              flush=True)

    environment.runner.register_message(RESULT, on_result)

    def finish(expected):
        merged, histogram = fleet_merge.merge(results, expected)
        merged["problems"] = failures + merged["problems"]
        merged["passed"] = not merged["problems"]
        out = environment.parsed_options.fleet_out
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "fleet-merged.json"), "w") as f:
            json.dump(merged, f)
            f.write("\n")
        with open(os.path.join(out, "fleet-merged.html"), "w") as f:
            f.write(fleet_merge.html(merged, histogram, results))
        print(json.dumps(merged), flush=True)
        environment.process_exit_code = 0 if merged["passed"] else 1
        environment.runner.quit()

    def watch():
        options = environment.parsed_options
        expected = options.expect_workers
        deadline = time.monotonic() + options.fleet_timeout
        runner = environment.runner
        while True:
            gevent.sleep(0.5)
            present = set()
            for client in list(runner.clients.values()):
                index = runner.get_worker_index(client.id)
                seen_workers[client.id] = index
                if client.state != STATE_MISSING:
                    present.add(client.id)
            # A worker missing its heartbeats, or gone from the master's list, before its shard reported.
            for client_id, index in seen_workers.items():
                if client_id not in present and index not in results:
                    message = f"shard {index}: its worker was lost before it reported (its stores went with it)"
                    if message not in failures:
                        failures.append(message)
            if failures and any("was lost" in f for f in failures):
                return finish(expected)
            if len(results) >= expected:
                return finish(expected)
            if time.monotonic() > deadline:
                failures.append(f"shards {sorted(set(range(expected)) - set(results))} did not report within "
                                f"{options.fleet_timeout:.0f} s")
                return finish(expected)

    @events.test_start.add_listener
    def _(environment, **_kwargs):
        gevent.spawn(watch)
