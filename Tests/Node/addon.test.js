// The Node addon's API beyond the demo (examples/node/addon.c), with node's own test runner:
// the codes of a refused configuration, setEnabled, update and the destinations' keys. Run by scripts/node-test.sh.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');

const outbox = require(path.join(__dirname, '..', '..', 'examples', 'node', 'build', 'outbox.node'));
const EINVAL = '-1';
const ECONFIG = '-2';
const EDISABLED = '-6';

function temporaryStore(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outbox-node-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'store.outbox');
}

// Malformed JSON is EINVAL (-1), as outbox.h says of outbox_open; an unknown key is ECONFIG (-2).
test('open reports the code of what was wrong', (t) => {
  const store = temporaryStore(t);
  assert.throws(() => outbox.open('{"storePath": '), (error) => error.code === EINVAL && /JSON|end/.test(error.message));
  assert.throws(() => outbox.open('{"storePath": 5}'), (error) => error.code === EINVAL);
  assert.throws(() => outbox.open(JSON.stringify({ storePath: store, bogus: 1 })),
    (error) => error.code === ECONFIG && error.message.includes('bogus'));
  assert.throws(() => outbox.open(JSON.stringify({ storePath: store, endpoint: 'http://' })),
    (error) => error.code === ECONFIG && error.message.includes('endpoint'));
});

// SPEC T6: opted out, tracking is refused with EDISABLED; opted in again, it is stored.
test('setEnabled opts out and back in', (t) => {
  const engine = outbox.open(JSON.stringify({ storePath: temporaryStore(t), sessionTracking: 'manual' }));
  t.after(() => { outbox.close(engine, 0); outbox.free(engine); });
  outbox.track(engine, 'before', null);
  outbox.setEnabled(engine, false);
  assert.throws(() => outbox.track(engine, 'while-out', null), (error) => error.code === EDISABLED);
  outbox.setEnabled(engine, true);
  outbox.track(engine, 'after', '{"i": 1}', true);
  const status = JSON.parse(outbox.status(engine));
  assert.strictEqual(status.enabled, true);
  assert.strictEqual(status.pending_critical, 1);
  assert.throws(() => outbox.setEnabled(engine), TypeError);
});

// SPEC R8: update changes what may change at run time and refuses the rest by name.
test('update changes the secret and refuses a fixed field', (t) => {
  const engine = outbox.open(JSON.stringify({
    storePath: temporaryStore(t), endpoint: 'http://127.0.0.1:9', appSecret: 'old', dispatchIntervalMs: 0,
  }));
  t.after(() => { outbox.close(engine, 0); outbox.free(engine); });
  outbox.update(engine, JSON.stringify({ appSecret: 'new', requestTimeoutMs: 5000 }));
  assert.throws(() => outbox.update(engine, JSON.stringify({ batchSize: 10 })),
    (error) => error.code === ECONFIG && error.message.includes('batchSize'));
  assert.throws(() => outbox.update(engine, '{"appSecret": '), (error) => error.code === EINVAL);
  assert.throws(() => outbox.update(engine, 5), TypeError);
});

// SPEC D1, R8: the destinations' keys reach the engine from Node: a PostHog engine needs its key, a key of
// another destination is refused by name, and update switches to Segment with its write key and profile.
test('destinations and their keys', (t) => {
  const store = temporaryStore(t);
  assert.throws(() => outbox.open(JSON.stringify({ storePath: store, endpoint: 'http://127.0.0.1:9', destination: 'posthog' })),
    (error) => error.code === ECONFIG && error.message.includes('apiKey'));
  assert.throws(() => outbox.open(JSON.stringify({ storePath: store, destination: 'posthog', writeKey: 'wk' })),
    (error) => error.code === ECONFIG && error.message.includes('writeKey'));
  const engine = outbox.open(JSON.stringify({
    storePath: store, endpoint: 'http://127.0.0.1:9', destination: 'posthog', apiKey: 'phc_k', dispatchIntervalMs: 0,
  }));
  t.after(() => { outbox.close(engine, 0); outbox.free(engine); });
  outbox.update(engine, JSON.stringify({ destination: 'segment', writeKey: 'wk', segmentProfile: 'rudderstack' }));
  assert.throws(() => outbox.update(engine, JSON.stringify({ segmentProfile: 'mparticle' })),
    (error) => error.code === ECONFIG && error.message.includes('segment or rudderstack'));
});
