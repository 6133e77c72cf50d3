// The webdav-mixed workload, shared by webdav-mixed.js and soak.js: on a collection of
// 30 files of 4 KiB, 80 % GET of a random file, 15 % PROPFIND Depth 1 of the collection,
// 5 % PUT over a random file (atomic replace: readers see the old or the new content).

import { collectionOf, dav, expect, filler, latency, runCollection, PROPFIND_ALLPROP } from './dav.js';

export const FILES = 30;
export const SIZE = 4096;

/** Creates the collection; its paths go to every VU. */
export function setupMixed() {
  const dir = runCollection('mixed');
  return { dir, paths: collectionOf(dir, FILES, SIZE) };
}

const replacement = filler(SIZE);

/** One iteration of the mix. */
export function mixed(data) {
  const roll = Math.random();
  const path = data.paths[Math.floor(Math.random() * data.paths.length)];
  if (roll < 0.80) {
    expect(dav('GET', path, 'get'), 'GET', {
      '200': (r) => r.status === 200,
      'whole file': (r) => r.body.length === SIZE,
    });
  } else if (roll < 0.95) {
    expect(dav('PROPFIND', `${data.dir}/`, 'propfind', PROPFIND_ALLPROP, { Depth: '1' }), 'PROPFIND', {
      '207': (r) => r.status === 207,
      'every file': (r) => (r.body.match(/<D:response>/g) || []).length === FILES + 1,
    });
  } else {
    expect(dav('PUT', path, 'put', replacement), 'PUT', { '204': (r) => r.status === 204 });
  }
}

/** The thresholds of the mix. */
export function mixedThresholds() {
  return {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{op:get}': latency(20, 50),
    'http_req_duration{op:propfind}': latency(30, 60),
    'http_req_duration{op:put}': latency(40, 80),
  };
}
