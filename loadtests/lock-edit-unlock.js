// lock-edit-unlock: what an office client does on save. Each VU, on a file of its own:
// LOCK (exclusive, 60 s), PUT with the token in If, UNLOCK; a fixed rate of cycles.
// Env: RATE (200 cycles/s), DURATION (30s), VUS (32 preallocated).

import { dav, expect, filler, keepsUp, latency, runCollection, must, LOCKINFO, removeCollection } from './lib/dav.js';

const RATE = Number(__ENV.RATE || 200);

export const options = {
  scenarios: {
    edit: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: Number(__ENV.VUS || 32),
      maxVUs: 256,
    },
  },
  thresholds: Object.assign(keepsUp(3 * RATE), {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{op:lock}': latency(30, 60),
    'http_req_duration{op:put}': latency(40, 80),
    'http_req_duration{op:unlock}': latency(30, 60),
  }),
};

export function setup() {
  const dir = runCollection('edit');
  must(dav('MKCOL', `${dir}/`, 'setup'), [201], `MKCOL ${dir}/`);
  return { dir };
}

export function teardown(data) {
  removeCollection(data.dir);
}

const document = filler(16 * 1024);

export default function (data) {
  const path = `${data.dir}/document-${__VU}.odt`;
  const lock = dav('LOCK', path, 'lock', LOCKINFO, { Timeout: 'Second-60' });
  expect(lock, 'LOCK', {
    '200 or 201': (r) => r.status === 200 || r.status === 201,
    'Lock-Token': (r) => /^<.+>$/.test(r.headers['Lock-Token'] || ''),
  });
  const token = lock.headers['Lock-Token'];
  expect(dav('PUT', path, 'put', document, { If: `(${token})` }), 'PUT', {
    '201 or 204': (r) => r.status === 201 || r.status === 204,
  });
  expect(dav('UNLOCK', path, 'unlock', null, { 'Lock-Token': token }), 'UNLOCK', {
    '204': (r) => r.status === 204,
  });
}
