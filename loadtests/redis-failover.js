// redis-failover: reads, writes and locks straight to two gateways (each request goes
// to one of them at random) while scripts/redis-failover.sh kills the Redis master
// behind Sentinel, where the locks and the replicas' registry live.
//
// Each VU keeps a file of its own and counts the versions it wrote:
// - 55 % GET of its file through either gateway: a read is stale when it shows a version
//   older than the last one a PUT was answered 2xx for (a gateway serving a copy kept
//   from before a change: must be 0);
// - 20 % PUT of the next version through either gateway;
// - 15 % LOCK and UNLOCK of a file of its own;
// - 10 % PUT without the token to a file it locked at its start: must get 423 through
//   either gateway all along (a lock the failover lost would let it through).
// A request is refused when it gets 503 with Retry-After (what kubedav answers while
// Redis cannot confirm a write); any other unexpected answer is a failure. Each refusal
// and failure is logged with its time, for the script to say when service recovered.
//
// Env: KUBEDAV_URLS (the gateways, comma-separated), RATE (100 requests/s), DURATION
// (40s), VUS (16 preallocated).

import http from 'k6/http';
import { Counter } from 'k6/metrics';
import { basic, must, removeCollection, runCollection } from './lib/dav.js';

const GATEWAYS = (__ENV.KUBEDAV_URLS || 'http://127.0.0.1:8080').split(',').map((u) => u.replace(/\/$/, ''));
const AUTH = basic(__ENV.KUBEDAV_USER || '', __ENV.KUBEDAV_PASSWORD || '');
const LOCKINFO = '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>'
  + '<D:locktype><D:write/></D:locktype><D:owner>redis-failover</D:owner></D:lockinfo>';

const refused = new Counter('requests_refused_with_retry_after');
const failed = new Counter('requests_failed');
const staleReads = new Counter('stale_reads');
const locksLost = new Counter('locks_lost');

export const options = {
  scenarios: {
    failover: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 100),
      timeUnit: '1s',
      duration: __ENV.DURATION || '40s',
      preAllocatedVUs: Number(__ENV.VUS || 16),
      maxVUs: 128,
    },
  },
  thresholds: {
    stale_reads: ['count==0'],
    locks_lost: ['count==0'],
    requests_failed: ['count==0'],
  },
};

// 503 and 423 are answers here, judged below.
http.setResponseCallback(http.expectedStatuses({ min: 200, max: 299 }, 423, 503));

/** One request to a gateway picked at random. */
function send(method, path, op, body = null, extra = {}) {
  const gateway = GATEWAYS[Math.floor(Math.random() * GATEWAYS.length)];
  return http.request(method, `${gateway}${path}`, body, {
    headers: Object.assign({}, AUTH, extra),
    tags: { op },
  });
}

/** Whether `response` was refused (counted and logged); else, if not `expected`, a failure. */
function judge(response, op, expected) {
  if (expected(response)) return true;
  if (response.status === 503 && response.headers['Retry-After']) {
    refused.add(1, { op });
    console.log(`refused at ${Date.now()}: ${op}`);
    return false;
  }
  failed.add(1, { op, status: String(response.status) });
  console.log(`failed at ${Date.now()}: ${op} ${response.status} ${response.error || ''} ${String(response.body).slice(0, 200)}`);
  return false;
}

export function setup() {
  const dir = runCollection('failover');
  must(http.request('MKCOL', `${GATEWAYS[0]}${dir}/`, null, { headers: AUTH }), [201], `MKCOL ${dir}/`);
  return { dir };
}

export function teardown(data) {
  removeCollection(data.dir);
}

// This VU's state: its file's versions, its held lock, a lock it could not release yet.
let mine = null;

function start(dir) {
  const state = {
    file: `${dir}/vu-${__VU}.txt`,
    locked: `${dir}/locked-${__VU}.txt`,
    edited: `${dir}/edited-${__VU}.txt`,
    acknowledged: -1,
    sent: -1,
    token: null,
    pending: null,
  };
  const lock = send('LOCK', state.locked, 'lock', LOCKINFO, { Timeout: 'Second-3600' });
  if (!judge(lock, 'LOCK held', (r) => r.status === 200 || r.status === 201)) return null;
  state.token = lock.headers['Lock-Token'];
  return state;
}

function put(state) {
  const version = state.sent + 1;
  state.sent = version;
  const response = send('PUT', state.file, 'put', `version ${version}`);
  if (judge(response, 'PUT', (r) => r.status === 201 || r.status === 204)) state.acknowledged = version;
}

function get(state) {
  if (state.acknowledged < 0) return put(state);
  const response = send('GET', state.file, 'get');
  if (!judge(response, 'GET', (r) => r.status === 200)) return;
  const version = Number((/^version (\d+)$/.exec(String(response.body)) || [])[1]);
  if (!(version >= state.acknowledged && version <= state.sent)) {
    staleReads.add(1);
    console.log(`stale at ${Date.now()}: ${state.file} read version ${version}, last acknowledged ${state.acknowledged}`);
  }
}

function lockAndUnlock(state) {
  if (state.pending) {
    const unlock = send('UNLOCK', state.edited, 'unlock', null, { 'Lock-Token': state.pending });
    if (judge(unlock, 'UNLOCK', (r) => r.status === 204)) state.pending = null;
    return;
  }
  const lock = send('LOCK', state.edited, 'lock', LOCKINFO, { Timeout: 'Second-60' });
  if (!judge(lock, 'LOCK', (r) => r.status === 200 || r.status === 201)) return;
  state.pending = lock.headers['Lock-Token'];
  const unlock = send('UNLOCK', state.edited, 'unlock', null, { 'Lock-Token': state.pending });
  if (judge(unlock, 'UNLOCK', (r) => r.status === 204)) state.pending = null;
}

function writeWithoutToken(state) {
  const response = send('PUT', state.locked, 'put-locked', 'no token');
  if (response.status >= 200 && response.status < 300) {
    locksLost.add(1);
    console.log(`lock lost at ${Date.now()}: ${state.locked} written without its token`);
    return;
  }
  judge(response, 'PUT without the token', (r) => r.status === 423);
}

export default function (data) {
  if (mine === null) {
    mine = start(data.dir);
    if (mine === null) return;
  }
  const roll = Math.random();
  if (roll < 0.55) get(mine);
  else if (roll < 0.75) put(mine);
  else if (roll < 0.90) lockAndUnlock(mine);
  else writeWithoutToken(mine);
}
