// rolling-restart: the webdav-mixed workload (80 % GET, 15 % PROPFIND Depth 1, 5 % PUT)
// through nginx in front of two gateways while scripts/rolling-restart.sh restarts them
// one after the other (SIGTERM, drain, start again), as a Deployment's rollout does
// behind an Ingress. A request is lost unless it got its normal answer or 503 with
// Retry-After (refused during a drain; clients retry those). Env: RATE (200 requests/s),
// DURATION (40s), VUS (32 preallocated).

import http from 'k6/http';
import { Counter } from 'k6/metrics';
import { dav, PROPFIND_ALLPROP, filler, removeCollection } from './lib/dav.js';
import { FILES, SIZE, setupMixed } from './lib/mixed.js';

const RATE = Number(__ENV.RATE || 200);
const lost = new Counter('requests_lost');
const refused = new Counter('requests_refused_with_retry_after');

export const options = {
  scenarios: {
    rollout: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: __ENV.DURATION || '40s',
      preAllocatedVUs: Number(__ENV.VUS || 32),
      maxVUs: 256,
    },
  },
  thresholds: { requests_lost: ['count==0'] },
};

// 503 is an answer here, counted apart; everything else outside 2xx is a failure.
http.setResponseCallback(http.expectedStatuses({ min: 200, max: 299 }, 503));

export function setup() {
  return setupMixed();
}

export function teardown(data) {
  removeCollection(data.dir);
}

const replacement = filler(SIZE);

/** Counts `response` as answered, refused (503 + Retry-After) or lost. */
function tally(response, answered, op) {
  if (answered(response)) return;
  if (response.status === 503 && response.headers['Retry-After']) {
    refused.add(1, { op });
    return;
  }
  lost.add(1, { op, status: String(response.status) });
  const id = response.headers['X-Request-Id'] || '-';
  const body = String(response.body);
  const shown = response.status === 200 ? `${body.length} bytes` : response.status === 207 ? listed(body) : body.slice(0, 200);
  console.warn(`lost: ${op} ${response.status} request ${id} after ${Math.round(response.timings.duration)} ms ${response.error || ''} ${shown}`);
}

/** A 207's hrefs, for a listing with the wrong number of members. */
function listed(body) {
  const hrefs = [...body.matchAll(/<D:href>([^<]*)<\/D:href>/g)].map((m) => m[1].replace(/^.*\//, ''));
  return `${hrefs.length} responses: ${hrefs.join(' ')}`;
}

export default function (data) {
  const roll = Math.random();
  const path = data.paths[Math.floor(Math.random() * data.paths.length)];
  if (roll < 0.80) {
    tally(dav('GET', path, 'get'), (r) => r.status === 200 && r.body.length === SIZE, 'GET');
  } else if (roll < 0.95) {
    tally(
      dav('PROPFIND', `${data.dir}/`, 'propfind', PROPFIND_ALLPROP, { Depth: '1' }),
      (r) => r.status === 207 && (r.body.match(/<D:response>/g) || []).length === FILES + 1,
      'PROPFIND',
    );
  } else {
    tally(dav('PUT', path, 'put', replacement), (r) => r.status === 204, 'PUT');
  }
}
