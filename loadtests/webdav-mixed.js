// webdav-mixed: 80 % GET, 15 % PROPFIND Depth 1, 5 % PUT on a 30-file collection, like
// the mixed scenario of the rshs report, at a fixed arrival rate (an open model: the
// latency bounds measure service time, not the queue a saturated closed loop builds).
// Env: RATE (500 requests/s), DURATION (30s), VUS (32 preallocated).

import { keepsUp, removeCollection } from './lib/dav.js';
import { mixed, mixedThresholds, setupMixed } from './lib/mixed.js';

const RATE = Number(__ENV.RATE || 500);

export const options = {
  scenarios: {
    mixed: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: Number(__ENV.VUS || 32),
      maxVUs: 256,
    },
  },
  thresholds: Object.assign(mixedThresholds(), keepsUp(RATE)),
};

export function setup() {
  return setupMixed();
}

export function teardown(data) {
  removeCollection(data.dir);
}

export default function (data) {
  mixed(data);
}
