// Shared by the scenarios: where kubedav is, how to log in, WebDAV requests, fixtures.
//
// Env: KUBEDAV_URL (default http://127.0.0.1:8080), KUBEDAV_USER and KUBEDAV_PASSWORD
// (Basic auth when set).

import http from 'k6/http';
import encoding from 'k6/encoding';
import { check, fail } from 'k6';

export const BASE = (__ENV.KUBEDAV_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const USER = __ENV.KUBEDAV_USER || '';
const PASSWORD = __ENV.KUBEDAV_PASSWORD || '';

/** The Authorization header for `user` and `password`. */
export function basic(user, password) {
  return { Authorization: `Basic ${encoding.b64encode(`${user}:${password}`)}` };
}

/** Headers with the configured credentials, if any, plus `extra`. */
export function headers(extra = {}) {
  return Object.assign(USER ? basic(USER, PASSWORD) : {}, extra);
}

/** One request: `op` tags it (thresholds are per op); `extra` adds headers. */
export function dav(method, path, op, body = null, extra = {}, params = {}) {
  return http.request(method, `${BASE}${path}`, body, Object.assign({
    headers: headers(extra),
    tags: { op },
  }, params));
}

/** Fails the setup (and so the run) unless `response` has one of `statuses`. */
export function must(response, statuses, what) {
  if (!statuses.includes(response.status)) {
    fail(`${what}: expected ${statuses.join(' or ')}, got ${response.status} ${response.body}`);
  }
  return response;
}

/** `n` bytes of printable filler, deterministic. */
export function filler(n) {
  const line = 'kubedav load test filler, deterministic and printable.\n';
  return line.repeat(Math.ceil(n / line.length)).slice(0, n);
}

/**
 * Deletes `collection` and everything in it, for a scenario's teardown: a run leaves
 * nothing on the server. Locks that interrupted iterations still hold are found with a
 * PROPFIND of DAV:lockdiscovery and released first (a locked member would make the
 * DELETE answer 423; with Depth: 1 where infinity is refused, so only the collection's own
 * members' locks are found there). Fails the teardown, and so the run, when anything is left.
 */
export function removeCollection(collection) {
  // Not counted as failed requests: a 423 here is expected and handled.
  const params = { responseCallback: http.expectedStatuses(204, 207, 403, 404, 423) };
  let response = dav('DELETE', `${collection}/`, 'teardown', null, {}, params);
  if (response.status === 423 || response.status === 207) {
    const body = '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>';
    let discovery = dav('PROPFIND', `${collection}/`, 'teardown', body, { Depth: 'infinity' }, params);
    // A server that refuses Depth: infinity (kubedav by default) lists the members.
    if (discovery.status !== 207) {
      discovery = dav('PROPFIND', `${collection}/`, 'teardown', body, { Depth: '1' }, params);
    }
    for (const member of discovery.body.split('</D:response>')) {
      const href = /<D:href>([^<]+)<\/D:href>/.exec(member);
      const tokens = member.match(/opaquelocktoken:[^<\s]+|urn:uuid:[^<\s]+/g) || [];
      if (!href) continue;
      const path = href[1].replace(/^https?:\/\/[^/]+/, '');
      for (const token of new Set(tokens)) {
        dav('UNLOCK', path, 'teardown', null, { 'Lock-Token': `<${token}>` }, params);
      }
    }
    response = dav('DELETE', `${collection}/`, 'teardown', null, {}, params);
  }
  must(response, [204, 404], `teardown: DELETE ${collection}/`);
}

/** A fresh collection name, so that runs never meet each other's files. */
export function runCollection(prefix) {
  return `/${prefix}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e9).toString(36)}`;
}

/** Creates `collection` with `count` files `f00.bin`... of `size` bytes; returns their paths. */
export function collectionOf(collection, count, size) {
  must(dav('MKCOL', `${collection}/`, 'setup'), [201], `MKCOL ${collection}/`);
  const body = filler(size);
  const paths = [];
  for (let i = 0; i < count; i++) {
    const path = `${collection}/f${String(i).padStart(2, '0')}.bin`;
    must(dav('PUT', path, 'setup', body), [201], `PUT ${path}`);
    paths.push(path);
  }
  return paths;
}

export const PROPFIND_ALLPROP =
  '<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>';

export const LOCKINFO =
  '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:">' +
  '<D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype>' +
  '<D:owner>k6</D:owner></D:lockinfo>';

/** check() with the op's name in every check, so a failed one says where. */
export function expect(response, op, checks) {
  const named = {};
  for (const [name, fn] of Object.entries(checks)) {
    named[`${op}: ${name}`] = fn;
  }
  return check(response, named, { op });
}

/**
 * Latency bounds in ms, p95 and p99, times LATENCY_SCALE (default 1). The bounds are set
 * for the reference machine; `make test` scales them for CI machines, whose neighbours
 * can slow them severalfold for minutes (docs/loadtests.md).
 */
export function latency(p95, p99) {
  const scale = Number(__ENV.LATENCY_SCALE || 1);
  return [`p(95)<${p95 * scale}`, `p(99)<${p99 * scale}`];
}

/**
 * A throughput floor for a fixed-rate scenario doing `perSecond` requests a second: at
 * least 95 % of them over the run. (k6's own dropped_iterations also counts iterations
 * that k6, sharing the CPU, failed to start on time, so it is not kubedav's figure.)
 */
export function keepsUp(perSecond, tag = '') {
  return { [`http_reqs${tag}`]: [`rate>${(perSecond * 0.9).toFixed(1)}`] };
}
