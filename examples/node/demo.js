// SPEC E4: Outbox on Node's own event loop. Usage: node examples/node/demo.js URL [N]
// Tracks N events (default 500) from JavaScript, dispatches until nothing waits, prints
// {"tracked": N, "delivered": N} and exits by itself: 0 only when the server acknowledged all N.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const url = process.argv[2];
const count = Number(process.argv[3] || 500);
if (!url || !(count > 0)) {
  console.error('usage: node demo.js URL [N]');
  process.exit(2);
}
const outbox = require(path.join(__dirname, 'build', 'outbox.node'));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outbox-node-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

const engine = outbox.open(JSON.stringify({
  storePath: path.join(dir, 'demo.outbox'),
  endpoint: url,
  appSecret: 'node-demo',
  sessionTracking: 'manual',   // only the events below reach the server
  dispatchIntervalMs: 0,       // manual dispatch: this script decides when to send
}));

// The engine runs on this thread's loop: it must not have started a thread of its own.
const engineThreads = fs.readdirSync('/proc/self/task')
  .map((task) => fs.readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim())
  .filter((name) => name.startsWith('outbox-'));

for (let i = 0; i < count; i++) {
  outbox.track(engine, 'node-demo', JSON.stringify({ i, runtime: 'node', version: process.version, even: i % 2 === 0 }));
}

const NO_DATA = 1;
let rounds = 0;
function drain() {
  outbox.dispatch(engine, (result) => {
    if (result !== NO_DATA && ++rounds < 100) return drain();
    const status = JSON.parse(outbox.status(engine));
    console.log(`{"tracked": ${count}, "delivered": ${status.delivered}}`);
    if (engineThreads.length > 0) console.error(`engine threads found: ${engineThreads.join(', ')}`);
    process.exitCode = status.delivered === count && engineThreads.length === 0 ? 0 : 1;
    // Returns at once; the engine closes its handles on Node's loop, which then has nothing left and ends.
    outbox.close(engine, 1000);
    outbox.free(engine);
  });
}
drain();
