// soak: the webdav-mixed workload plus a lock/edit/unlock cycle now and then, held for a
// configurable time at a moderate, fixed rate, to show that latency, memory and file
// descriptors stay flat. Env: DURATION (10m), RATE (200 iterations/s), VUS (32, the most
// in flight).

import { dav, expect, filler, keepsUp, must, LOCKINFO, removeCollection } from './lib/dav.js';
import { mixed, mixedThresholds, setupMixed } from './lib/mixed.js';

export const options = {
  scenarios: {
    soak: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 200),
      timeUnit: '1s',
      duration: __ENV.DURATION || '10m',
      preAllocatedVUs: Number(__ENV.VUS || 32),
    },
  },
  thresholds: Object.assign(mixedThresholds(), keepsUp(Number(__ENV.RATE || 200))),
};

export function setup() {
  const data = setupMixed();
  // The locked files live beside the mix's collection, whose listing stays 30 files.
  data.locks = `${data.dir}-locks`;
  must(dav('MKCOL', `${data.locks}/`, 'setup'), [201], `MKCOL ${data.locks}/`);
  return data;
}

export function teardown(data) {
  removeCollection(data.locks);
  removeCollection(data.dir);
}

export default function (data) {
  if (Math.random() >= 0.01) {
    mixed(data);
    return;
  }
  const path = `${data.locks}/vu-${__VU}.txt`;
  const lock = dav('LOCK', path, 'lock', LOCKINFO, { Timeout: 'Second-30' });
  expect(lock, 'LOCK', { '200 or 201': (r) => r.status === 200 || r.status === 201 });
  const token = lock.headers['Lock-Token'];
  expect(dav('PUT', path, 'put', filler(512), { If: `(${token})` }), 'PUT under lock', {
    '2xx': (r) => r.status === 201 || r.status === 204,
  });
  expect(dav('UNLOCK', path, 'unlock', null, { 'Lock-Token': token }), 'UNLOCK', {
    '204': (r) => r.status === 204,
  });
}
