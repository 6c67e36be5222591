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

// SPEC D15: the Engine class passes a `destinations` array through: two open and take events; a name given twice,
// the list beside the single destination's endpoint, a key no destination takes and a key of another wire are
// refused with ECONFIG naming them.
test('several destinations from one store', (t) => {
  const api = require(path.join(__dirname, '..', '..', 'examples', 'node', 'outbox.js'));
  const store = temporaryStore(t);
  const ops = { name: 'ops', destination: 'otlp', endpoint: 'http://127.0.0.1:9', otlpEncoding: 'json' };
  const product = { name: 'product', destination: 'posthog', endpoint: 'http://127.0.0.1:9', apiKey: 'phc_k' };
  const engine = api.open({ storePath: store, sessionTracking: 'manual', dispatchIntervalMs: 0, destinations: [ops, product] });
  t.after(() => { engine.close(0); engine.free(); });
  engine.track('two-destinations', { i: 1 }, { critical: true });
  assert.strictEqual(engine.status().pending_critical, 1);
  const other = path.join(path.dirname(store), 'other.outbox');
  assert.throws(() => api.open({ storePath: other, destinations: [ops, { ...product, name: 'ops' }] }),
    (error) => error.code === ECONFIG && error.message.includes("'ops' twice"));
  assert.throws(() => api.open({ storePath: other, endpoint: 'http://127.0.0.1:9', destinations: [ops] }),
    (error) => error.code === ECONFIG && error.message.includes('together with the single destination'));
  assert.throws(() => api.open({ storePath: other, destinations: [{ ...ops, batchSize: 5 }] }),
    (error) => error.code === ECONFIG && error.message.includes('destinations[0].batchSize'));
  assert.throws(() => api.open({ storePath: other, destinations: [product, { ...ops, writeKey: 'wk' }] }),
    (error) => error.code === ECONFIG && error.message.includes("'destinations[1].writeKey' belongs to the segment destination"));
});

// SPEC E5: the whole model from Node through outbox.js, on Node's own loop, read back from the mock's /_mock/logs.
// scripts/node-test.sh passes the running mock's URL in OUTBOX_MOCK_URL.
test('the analytics model reaches the mock', async (t) => {
  const url = process.env.OUTBOX_MOCK_URL;
  assert.ok(url, 'OUTBOX_MOCK_URL names a running outbox-mock (scripts/node-test.sh sets it)');
  const api = require(path.join(__dirname, '..', '..', 'examples', 'node', 'outbox.js'));
  const engine = api.open({
    storePath: temporaryStore(t), endpoint: url, appSecret: 's', sessionTracking: 'manual', dispatchIntervalMs: 0,
  });
  let closed = false;
  t.after(() => { if (!closed) engine.close(0); engine.free(); });
  const tag = `node-${process.pid}`;
  assert.throws(() => engine.endSession(), (error) => error.code === EINVAL && /no session/.test(error.message));
  engine.startSession();
  engine.trackScreen(`${tag}-screen`, { source: 'search' }, '/player/42');
  engine.trackCategory(`${tag}>Music>Play`, { value: 'clip-42', durationMs: 61500 });
  engine.setUserId(`${tag}-user`);
  engine.setUserProperties({ plan: 'pro', seats: 3 });
  engine.identify(`${tag}-user2`, { company: 'acme' });
  const timer = engine.startTimer(`${tag}-load`);
  assert.ok(timer instanceof api.Timer && timer.id > 0);
  engine.pauseTimer(timer);
  engine.resumeTimer(timer);
  await new Promise((resolve) => setTimeout(resolve, 30)); // what the timer measures, not a wait for the engine
  engine.endTimer(timer, { asset: 'level-2' });
  assert.throws(() => engine.endTimer(timer), (error) => error.code === EINVAL && /not open/.test(error.message));
  assert.throws(() => engine.pauseTimer(42), TypeError);
  engine.startTimer(`${tag}-named`);
  engine.endTimer(`${tag}-named`);
  engine.sendLocation(41.0082, 28.9784, 12.5);
  assert.throws(() => engine.sendLocation(NaN, 1), (error) => error.code === EINVAL);
  assert.throws(() => engine.trackScreen(''), (error) => error.code === EINVAL);
  assert.throws(() => engine.trackScreen(5), TypeError);
  assert.throws(() => engine.identify(null), TypeError);
  engine.setReachability(true);
  engine.enterBackground();
  engine.enterForeground();
  engine.endSession();
  assert.throws(() => engine.endSession(), (error) => error.code === EINVAL);
  for (let round = 0; round < 100 && await engine.dispatch() !== api.NO_DATA; round++);
  engine.close(500);
  closed = true;

  // One JSON object per line.
  const list = (await (await fetch(`${url}/_mock/logs`)).text()).split('\n').filter((line) => line).map(JSON.parse);
  const ours = list.map((entry) => JSON.stringify(entry)).filter((text) => text.includes(tag));
  const find = (needle) => ours.find((text) => text.includes(needle)) || '';
  assert.match(find('"type":"screen"'), /\/player\/42/);
  assert.match(find(`${tag}>Music>Play`), /clip-42/);
  assert.match(find(`${tag}>Music>Play`), /61500/);
  assert.match(find('"type":"userProperties"'), /"plan"/);
  assert.match(find('"company"'), new RegExp(`${tag}-user2`));
  const load = JSON.parse(find(`${tag}-load`));
  const duration = load.typedProperties.find((p) => p.name === '$event_duration');
  assert.ok(duration && duration.value >= 30, `the timer measured ${duration && duration.value} ms`);
  assert.match(find(`${tag}-named`), /"type":"event"/);
  // The session's own logs carry no tag of ours: the user id set inside it marks its end.
  assert.ok(list.some((entry) => entry.type === 'endSession' && entry.userId === `${tag}-user2`), 'the endSession');
  assert.ok(list.some((entry) => entry.type === 'location' && entry.userId === `${tag}-user2`), 'the location');
});

// BEHAVIOUR H2–H3: a destination's policy from Node (the configuration's keys): the excluded event is settled
// as skipped and never reaches the mock, the redacted property leaves the one that does; a bad rate is ECONFIG.
test('a policy decides what the destination receives', async (t) => {
  const url = process.env.OUTBOX_MOCK_URL;
  assert.ok(url, 'OUTBOX_MOCK_URL names a running outbox-mock (scripts/node-test.sh sets it)');
  const api = require(path.join(__dirname, '..', '..', 'examples', 'node', 'outbox.js'));
  const store = temporaryStore(t);
  const engine = api.open({
    storePath: store, endpoint: url, appSecret: 's', sessionTracking: 'manual', dispatchIntervalMs: 0,
    exclude: ['debug*'], redact: ['email'],
  });
  let closed = false;
  t.after(() => { if (!closed) engine.close(0); engine.free(); });
  const tag = `node-policy-${process.pid}`;
  engine.track(`debug_${tag}`, { i: 1 });
  engine.track(`keep_${tag}`, { email: 'ada@example.com', plan: 'pro' });
  for (let round = 0; round < 100 && await engine.dispatch() !== api.NO_DATA; round++);
  const status = engine.status();
  assert.strictEqual(status.skipped, 1);
  assert.strictEqual(status.delivered, 1);
  engine.close(500);
  closed = true;
  const logs = await (await fetch(`${url}/_mock/logs`)).text();
  assert.ok(!logs.includes(`debug_${tag}`), 'the excluded event never left');
  const kept = logs.split('\n').find((line) => line.includes(`keep_${tag}`)) || '';
  assert.match(kept, /"plan"/);
  assert.ok(!kept.includes('ada@example.com'), `redacted: ${kept}`);
  assert.throws(() => api.open({ storePath: path.join(path.dirname(store), 'bad.outbox'), sample: { x: 2 } }),
    (error) => error.code === ECONFIG && error.message.includes("sample's rate for 'x'"));
});

// SPEC C7 (round 4): on Node's loop a pending dispatch() promise keeps the process alive until it settles, and an
// idle engine never does. Each script below leaves its engine open and must exit by itself: one that tracks five
// events and only dispatches prints GOOD (0) first; one that only opens an engine prints at once.
test('a pending dispatch keeps Node alive; an idle engine does not', (t) => {
  const url = process.env.OUTBOX_MOCK_URL;
  assert.ok(url, 'OUTBOX_MOCK_URL names a running outbox-mock (scripts/node-test.sh sets it)');
  const { spawnSync } = require('child_process');
  const api = JSON.stringify(path.join(__dirname, '..', '..', 'examples', 'node', 'outbox.js'));
  const config = (store) => JSON.stringify({
    storePath: store, endpoint: url, appSecret: 's', sessionTracking: 'manual', dispatchIntervalMs: 0,
  });
  // A hang is a failure: the timeout kills the script and its status is null.
  const run = (body) => spawnSync(process.execPath, ['-e', `const outbox = require(${api});\n${body}`],
    { encoding: 'utf8', timeout: 30000 });
  const dispatching = run(`const engine = outbox.open(${config(temporaryStore(t))});
    for (let i = 0; i < 5; i++) engine.track('node-held', { i });
    engine.dispatch().then((result) => console.log('dispatched ' + result));`);
  assert.strictEqual(dispatching.status, 0, `the dispatching script: ${dispatching.signal || dispatching.stderr}`);
  assert.strictEqual(dispatching.stdout.trim(), 'dispatched 0');
  const idle = run(`outbox.open(${config(temporaryStore(t))}).track('node-idle'); console.log('opened');`);
  assert.strictEqual(idle.status, 0, `the idle script: ${idle.signal || idle.stderr}`);
  assert.strictEqual(idle.stdout.trim(), 'opened');
});

// Whether an engine holds the store: its `.lock` file is locked (flock) while it does.
function isLocked(store) {
  try {
    const { execFileSync } = require('child_process');
    execFileSync('flock', ['-n', store + '.lock', 'true']);
    return false;
  } catch (error) {
    return true;
  }
}

// SPEC K1: storeKeyFile seals the store from Node too; without its key the store is refused, left as it was.
test('a sealed store needs its key file', async (t) => {
  const store = temporaryStore(t);
  const key = path.join(path.dirname(store), 'store.key');
  fs.writeFileSync(key, '0f'.repeat(32) + '\n', { mode: 0o600 });
  const engine = outbox.open(JSON.stringify({ storePath: store, storeKeyFile: key, sessionTracking: 'manual' }));
  outbox.track(engine, 'sealed', '{"secret": "node-sealed-value"}', true);
  outbox.close(engine, 0);
  outbox.free(engine);
  // The engine runs on Node's loop: its handles, and the store with them, close during the loop's next turns; the
  // store's lock file says when (no engine event does).
  for (let turn = 0; turn < 200 && isLocked(store); turn++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(!fs.readFileSync(store).includes('node-sealed-value'), 'the property is not readable in the store');
  assert.throws(() => outbox.open(JSON.stringify({ storePath: store })),
    (error) => error.code === EINVAL && error.message.includes('store key invalid'));
  fs.chmodSync(key, 0o644);
  assert.throws(() => outbox.open(JSON.stringify({ storePath: store, storeKeyFile: key })),
    (error) => error.code === ECONFIG && error.message.includes('chmod 600'));
});

// SPEC H1: beforeStore in outbox.js's configuration runs inside every call that tracks an event, on Node's thread:
// it renames, redacts and drops; what it removed is not in the store file; what it returns is checked as track's
// arguments are; a hook that throws makes the call throw that and store nothing; update replaces or removes it.
test('beforeStore rewrites, redacts and drops before the store', async (t) => {
  const api = require(path.join(__dirname, '..', '..', 'examples', 'node', 'outbox.js'));
  const store = temporaryStore(t);
  const seen = [];
  const engine = api.open({
    storePath: store, sessionTracking: 'manual',
    beforeStore: (event) => {
      seen.push(JSON.parse(JSON.stringify(event)));
      if (event.name.startsWith('debug.')) return false;
      if (event.name === 'boom') throw new Error('hook failed');
      if (event.name === 'blank') event.name = '';
      if (event.name === 'signup') event.name = 'sign_up';
      delete event.properties.email;
      return true;
    },
  });
  engine.track('signup', { email: 'node-secret@example.com', plan: 'pro' }, { critical: true });
  assert.deepStrictEqual(seen[0], { name: 'signup', properties: { email: 'node-secret@example.com', plan: 'pro' } });
  engine.track('debug.noise', { token: 'node-dropped-value' }, { critical: true });
  engine.trackCategory('Video>Play', { value: 'clip', critical: true });
  assert.strictEqual(seen[2].properties.$event_value, 'clip');
  const timer = engine.startTimer('debug.timer');
  engine.endTimer(timer);
  assert.throws(() => engine.track('boom'), /hook failed/);
  assert.throws(() => engine.track('blank'), (error) => error.code === EINVAL && /empty/.test(error.message));
  let status = engine.status();
  assert.strictEqual(status.dropped_by_policy, 2);
  assert.strictEqual(status.pending_critical, 2);
  engine.update({ beforeStore: (event) => { event.name = 'replaced'; } });
  engine.track('x', null, { critical: true });
  engine.update({ beforeStore: null });
  engine.track('debug.kept', null, { critical: true });
  assert.throws(() => engine.update({ beforeStore: 5 }), TypeError);
  status = engine.status();
  assert.strictEqual(status.pending_critical, 4);
  assert.strictEqual(status.dropped_by_policy, 2);
  engine.close(0);
  engine.free();
  for (let turn = 0; turn < 200 && isLocked(store); turn++) await new Promise((resolve) => setTimeout(resolve, 10));
  const files = fs.readdirSync(path.dirname(store)).map((name) => fs.readFileSync(path.join(path.dirname(store), name)));
  assert.ok(files.some((bytes) => bytes.includes('sign_up')), 'the renamed event is in the store');
  assert.ok(files.some((bytes) => bytes.includes('replaced')), 'the second hook\'s name is in the store');
  assert.ok(!files.some((bytes) => bytes.includes('node-secret')), 'the removed e-mail is not');
  assert.ok(!files.some((bytes) => bytes.includes('node-dropped-value')), 'nor the dropped event');
});

// SPEC D11–D14: the round-4 wires' keys from Node. Each bad value is refused at open (ECONFIG) naming its key: a
// Sensors endpoint without its project, a measurementId not of GA4's form, GA4 without apiSecret, Amplitude without
// apiKey, a Mixpanel service account without projectId, a key of another wire; update is refused the same way.
test('the Sensors, GA4, Amplitude and Mixpanel keys are checked by name', (t) => {
  const store = temporaryStore(t);
  const open = (config) => outbox.open(JSON.stringify({ storePath: store, endpoint: 'http://127.0.0.1:9', ...config }));
  const refused = (config, ...names) => assert.throws(() => open(config),
    (error) => error.code === ECONFIG && names.every((name) => error.message.includes(name)),
    `${JSON.stringify(config)} refused naming ${names}`);
  refused({ destination: 'sensors', endpoint: 'http://127.0.0.1:9/sa' }, 'endpoint', 'project');
  refused({ destination: 'ga4', measurementId: 'UA-1234', apiSecret: 's' }, 'measurementId', 'G-');
  refused({ destination: 'ga4', measurementId: 'G-ABC123' }, 'apiSecret');
  refused({ destination: 'ga4', measurementId: 'G-ABC123', apiSecret: '' }, 'apiSecret');
  refused({ destination: 'amplitude' }, 'apiKey');
  refused({ destination: 'amplitude', apiKey: 'k', projectToken: 't' }, 'projectToken', 'mixpanel destination');
  refused({ destination: 'mixpanel' }, 'projectToken');
  refused({ destination: 'mixpanel', serviceAccountUser: 'u', serviceAccountSecret: 's' }, 'projectId');
  refused({ destination: 'mixpanel', serviceAccountUser: 'u', serviceAccountSecret: 's', projectId: -7 }, 'projectId');
  refused({ destination: 'sensors', endpoint: 'http://127.0.0.1:9/sa?project=p', measurementId: 'G-ABC123' },
    'measurementId', 'ga4 destination');
  assert.throws(() => open({ destination: 'mixpanel', projectToken: 't', projectId: '7' }),
    (error) => error.code === EINVAL && error.message.includes('projectId'), 'a projectId that is not a number');
  const engine = open({ destination: 'amplitude', apiKey: 'amp-key', dispatchIntervalMs: 0 });
  t.after(() => { outbox.close(engine, 0); outbox.free(engine); });
  assert.throws(() => outbox.update(engine, JSON.stringify({ destination: 'ga4', measurementId: 'G-lower', apiSecret: 's' })),
    (error) => error.code === ECONFIG && error.message.includes('measurementId'));
  outbox.update(engine, JSON.stringify({ destination: 'mixpanel', projectToken: 'mp-token' }));
  assert.throws(() => outbox.update(engine, JSON.stringify({ apiKey: 'amp-key' })),
    (error) => error.code === ECONFIG && error.message.includes('apiKey'));
});

// SPEC D11–D14, E5: each round-4 wire configured from Node delivers to the mock speaking it: its own events, each
// once, no secret in the status.
test('the Sensors, GA4, Amplitude and Mixpanel wires deliver from Node', async (t) => {
  const url = process.env.OUTBOX_MOCK_URL;
  assert.ok(url, 'OUTBOX_MOCK_URL names a running outbox-mock (scripts/node-test.sh sets it)');
  const api = require(path.join(__dirname, '..', '..', 'examples', 'node', 'outbox.js'));
  const stats = async () => (await (await fetch(`${url}/_mock/stats`)).json()).vendors;
  const before = await stats();
  const wires = {
    sensors: { endpoint: `${url}/sa?project=default` },
    ga4: { measurementId: 'G-NODE123', apiSecret: 'node-ga4-secret' },
    amplitude: { apiKey: 'node-amplitude-key' },
    mixpanel: { projectToken: 'node-mixpanel-token' },
  };
  for (const [wire, keys] of Object.entries(wires)) {
    const engine = api.open({
      storePath: temporaryStore(t), endpoint: url, destination: wire, sessionTracking: 'manual', dispatchIntervalMs: 0,
      ...keys,
    });
    engine.track(`node_${wire}`, { i: 1 });
    engine.track(`node_${wire}`, { i: 2 });
    for (let round = 0; round < 100 && await engine.dispatch() !== api.NO_DATA; round++);
    const status = engine.status();
    engine.close(500);
    engine.free();
    assert.strictEqual(status.delivered, 2, `${wire}: ${JSON.stringify(status)}`);
    for (const secret of Object.values(keys)) {
      if (secret.startsWith('node-')) assert.ok(!JSON.stringify(status).includes(secret), `${wire}: the secret in the status`);
    }
  }
  const after = await stats();
  for (const wire of Object.keys(wires)) {
    assert.strictEqual(after[wire].events_unique - before[wire].events_unique, 2, `${wire}: ${JSON.stringify(after[wire])}`);
    assert.strictEqual(after[wire].events_refused, before[wire].events_refused, `${wire}: nothing refused`);
  }
});
