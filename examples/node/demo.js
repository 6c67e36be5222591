// SPEC E4, E5: Outbox on Node's own event loop. Usage: node examples/node/demo.js URL [N]
// Records N logs (default 500) from JavaScript — a session with a screen and N − 3 events in it — dispatches until
// nothing waits, prints {"tracked": N, "delivered": N} and exits by itself: 0 only when the server acknowledged all N.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const url = process.argv[2];
const count = Number(process.argv[3] || 500);
if (!url || !(count >= 3)) {
  console.error('usage: node demo.js URL [N]');
  process.exit(2);
}
const outbox = require(path.join(__dirname, 'outbox.js'));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outbox-node-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

const engine = outbox.open({
  storePath: path.join(dir, 'demo.outbox'),
  endpoint: url,
  appSecret: 'node-demo',
  sessionTracking: 'manual',   // only the logs below reach the server
  dispatchIntervalMs: 0,       // manual dispatch: this script decides when to send
});

// The engine runs on this thread's loop: it must not have started a thread of its own.
const engineThreads = fs.readdirSync('/proc/self/task')
  .map((task) => fs.readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim())
  .filter((name) => name.startsWith('outbox-'));

engine.startSession();
engine.trackScreen('Demo', { runtime: 'node' }, '/demo');
for (let i = 0; i < count - 3; i++) {
  engine.track('node-demo', { i, runtime: 'node', version: process.version, even: i % 2 === 0 });
}
engine.endSession();

async function drain() {
  for (let rounds = 0; rounds < 100; rounds++) {
    if (await engine.dispatch() === outbox.NO_DATA) break;
  }
  const status = engine.status();
  console.log(`{"tracked": ${count}, "delivered": ${status.delivered}}`);
  if (engineThreads.length > 0) console.error(`engine threads found: ${engineThreads.join(', ')}`);
  process.exitCode = status.delivered === count && engineThreads.length === 0 ? 0 : 1;
  // Returns at once; the engine closes its handles on Node's loop, which then has nothing left and ends.
  engine.close(1000);
  engine.free();
}
drain();
