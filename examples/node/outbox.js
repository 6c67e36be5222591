// Outbox for Node (SPEC E4, E5): the addon of addon.c as an `Engine` class that takes JavaScript objects. The
// engine runs on Node's own loop; every method is synchronous but `dispatch`, and a refusal throws an Error whose
// message names the problem and whose `code` is the OUTBOX_E… value as a string ('-1' EINVAL, '-2' ECONFIG, …).
//
//   const outbox = require('./outbox');
//   const engine = outbox.open({ storePath: '/var/lib/app/analytics.outbox', endpoint: url, appSecret: 's' });
//   engine.startSession();
//   engine.trackScreen('Player', { source: 'search' }, '/player/42');
//   const t = engine.startTimer('load');
//   engine.endTimer(t, { asset: 'level-2' });
//   engine.close(1000);
//
// Several destinations from one store (SPEC D15): `destinations`, an array of objects, each a `name` and that
// destination's own keys, instead of the single destination's keys:
//
//   outbox.open({ storePath, destinations: [
//     { name: 'ops', destination: 'otlp', endpoint: 'http://collector:4318' },
//     { name: 'product', destination: 'posthog', endpoint: 'https://eu.i.posthog.com', apiKey: 'phc_…' }] });
//
// `beforeStore` in the configuration (or in `update`; null removes it) is a function that runs inside every call that
// tracks an event (track, trackCategory, endTimer), on this thread: it receives the event { name, properties }, may
// change either, and returns false to drop it (SPEC H1). What it leaves is checked as `track`'s arguments are; if it
// throws, the call throws that and stores nothing.
'use strict';
const path = require('path');

const addon = require(path.join(__dirname, 'build', 'outbox.node'));

const json = (value) => (value == null ? null : JSON.stringify(value));

/** A running duration timer: `startTimer` returns one; `pauseTimer`, `resumeTimer` and `endTimer` take it. */
class Timer {
  constructor(id, name) {
    this.id = id;
    this.name = name;
  }
}

class Engine {
  /** Opens (or creates) the store: `config` holds the keys of outbox.h's outbox_open, `destinations` (an array of
   *  objects) among them. */
  constructor(config) {
    const { beforeStore, ...data } = config;
    this.handle = addon.open(JSON.stringify(data));
    if (beforeStore != null) this.#setBeforeStore(beforeStore);
  }

  /** SPEC H1: the addon's hook takes and returns JSON; this one takes and may change an object. */
  #setBeforeStore(hook) {
    if (hook !== null && typeof hook !== 'function') throw new TypeError('beforeStore must be a function or null');
    this.hook = addon.setBeforeStore(this.handle, hook && ((json) => {
      const event = JSON.parse(json);
      return hook(event) === false ? null : JSON.stringify(event);
    }));
  }

  /** An event: `properties` a flat object of strings, numbers and booleans (integers stored as integers). */
  track(name, properties = null, { critical = false } = {}) {
    addon.track(this.handle, name, json(properties), critical);
  }

  /** A categorised event ("Cat1>Cat2>Cat3") with an optional value and duration in ms (SPEC A7). */
  trackCategory(name, { value = null, durationMs = null, properties = null, critical = false } = {}) {
    addon.trackCategory(this.handle, name, value, durationMs == null ? -1 : durationMs, json(properties), critical);
  }

  startSession() { addon.startSession(this.handle); }
  endSession() { addon.endSession(this.handle); }
  enterBackground() { addon.enterBackground(this.handle); }
  enterForeground() { addon.enterForeground(this.handle); }

  /** A screen view with its properties and path (both optional). */
  trackScreen(name, properties = null, screenPath = null) {
    addon.trackScreen(this.handle, name, screenPath, json(properties));
  }

  /** The signed-in user's id, sent on every later log; null signs out. */
  setUserId(id) { addon.setUserId(this.handle, id); }
  setUserProperties(properties) { addon.setUserProperties(this.handle, json(properties)); }
  /** The user signed in: links the anonymous install to `userId`, with optional traits (SPEC A8a). */
  identify(userId, traits = null) { addon.identify(this.handle, userId, json(traits)); }

  /** Starts a duration timer on the boot clock; its end tracks the event `name` with `$event_duration`. */
  startTimer(name) { return new Timer(addon.startTimer(this.handle, name), name); }
  pauseTimer(timer) { addon.pauseTimer(this.handle, Engine.#timerId(timer)); }
  resumeTimer(timer) { addon.resumeTimer(this.handle, Engine.#timerId(timer)); }
  /** Ends a timer (a Timer, or a name: the most recent timer of that name) and tracks its event. */
  endTimer(timer, properties = null, { critical = false } = {}) {
    if (typeof timer === 'string') addon.endTimerNamed(this.handle, timer, json(properties), critical);
    else addon.endTimer(this.handle, Engine.#timerId(timer), json(properties), critical);
  }

  sendLocation(latitude, longitude, accuracy = null) {
    addon.sendLocation(this.handle, latitude, longitude, accuracy == null ? -1 : accuracy);
  }

  /** true: online; false: offline (nothing is sent); null: the engine's own network watcher decides again. */
  setReachability(online) { addon.setReachability(this.handle, online == null ? -1 : online ? 1 : 0); }

  setEnabled(enabled) { addon.setEnabled(this.handle, enabled); }
  /** Changes what may change at run time (outbox.h's outbox_update keys). */
  update(config) {
    const { beforeStore, ...data } = config;
    if (Object.keys(data).length > 0 || beforeStore === undefined) addon.update(this.handle, JSON.stringify(data));
    if (beforeStore !== undefined) this.#setBeforeStore(beforeStore);
  }
  /** Sends what waits now; resolves with GOOD (0), NO_DATA (1) or ERROR (2) for the first request it started. */
  dispatch() { return new Promise((resolve) => addon.dispatch(this.handle, resolve)); }
  status() { return JSON.parse(addon.status(this.handle)); }
  /** Sends what it can within drainMs on Node's loop, then stops; the rest stays stored for the next start. */
  close(drainMs = 0) { addon.close(this.handle, drainMs); }
  free() { addon.free(this.handle); }

  static #timerId(timer) {
    if (!(timer instanceof Timer)) throw new TypeError('expected a Timer that startTimer returned');
    return timer.id;
  }
}

module.exports = {
  open: (config) => new Engine(config),
  Engine,
  Timer,
  GOOD: 0,
  NO_DATA: 1,
  ERROR: 2,
  version: addon.version,
};
