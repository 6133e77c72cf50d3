// auth-flood: users with valid, cached credentials keep working while a flood of wrong
// passwords for random users hits the same gateway. The flood's answers (401, or 503
// with Retry-After when the crypt pool is full) are expected; the valid users' requests
// must all succeed, within their latency bounds. The valid users come at a fixed rate;
// the flood is as fast as it can be. Env: RATE (200 valid requests/s), FLOOD_VUS (32),
// DURATION (30s). Run with per-address lockouts off (make loadtest does), as a flood
// from many addresses would be.

import http from 'k6/http';
import { basic, dav, expect, keepsUp, latency, must, runCollection, removeCollection } from './lib/dav.js';

const duration = __ENV.DURATION || '30s';
const RATE = Number(__ENV.RATE || 200);

export const options = {
  scenarios: {
    valid: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration,
      preAllocatedVUs: 16,
      maxVUs: 128,
      exec: 'valid',
    },
    flood: {
      executor: 'constant-vus',
      vus: Number(__ENV.FLOOD_VUS || 32),
      duration,
      exec: 'flood',
    },
  },
  thresholds: Object.assign(keepsUp(RATE, '{scenario:valid}'), {
    'checks{scenario:valid}': ['rate==1'],
    'checks{scenario:flood}': ['rate==1'],
    'http_req_failed{scenario:valid}': ['rate==0'],
    'http_req_failed{scenario:flood}': ['rate==0'],
    'http_req_duration{scenario:valid}': latency(30, 80),
  }),
};

export function setup() {
  const dir = runCollection('auth');
  must(dav('MKCOL', `${dir}/`, 'setup'), [201], `MKCOL ${dir}/`);
  must(dav('PUT', `${dir}/file.txt`, 'setup', 'for valid users\n'), [201], 'PUT');
  return { dir, path: `${dir}/file.txt` };
}

export function teardown(data) {
  removeCollection(data.dir);
}

export function valid(data) {
  expect(dav('GET', data.path, 'get'), 'valid GET', { '200': (r) => r.status === 200 });
}

const refused = http.expectedStatuses(401, 503);

export function flood(data) {
  const user = `mallory-${Math.floor(Math.random() * 1e6)}`;
  const response = dav('GET', data.path, 'flood', null, basic(user, `guess-${Math.random()}`), {
    responseCallback: refused,
  });
  expect(response, 'wrong password', {
    'refused': (r) => r.status === 401 || (r.status === 503 && !!r.headers['Retry-After']),
  });
}
