// markdown-agents: agents reading HTML pages as Markdown (Accept: text/markdown). Ten
// pages of about 20 KiB; the first reads convert, later ones come from the cache until
// the page changes. A fixed rate of reads. Env: RATE (500/s), DURATION (30s), VUS (32
// preallocated).

import { dav, expect, keepsUp, latency, must, runCollection, removeCollection } from './lib/dav.js';

const RATE = Number(__ENV.RATE || 500);

export const options = {
  scenarios: {
    agents: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: Number(__ENV.VUS || 32),
      maxVUs: 256,
    },
  },
  thresholds: Object.assign(keepsUp(RATE), {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{op:markdown}': latency(40, 100),
  }),
};

const PAGES = 10;

function page(n) {
  let body = `<!doctype html><html><head><title>Page ${n}</title><style>p{}</style></head><body>`;
  body += `<nav><a href="/">home</a></nav><main><h1>Page ${n}</h1>`;
  for (let s = 0; s < 40; s++) {
    body += `<h2>Section ${s}</h2><p>Agents read <b>Markdown</b>, not <i>HTML</i>: ` +
      `<a href="/p${s}.html">link ${s}</a>, a list follows.</p><ul><li>one</li><li>two</li></ul>`;
  }
  return `${body}</main><script>var ignored = 1;</script></body></html>`;
}

export function setup() {
  const dir = runCollection('agents');
  must(dav('MKCOL', `${dir}/`, 'setup'), [201], `MKCOL ${dir}/`);
  const paths = [];
  for (let n = 0; n < PAGES; n++) {
    const path = `${dir}/page-${n}.html`;
    must(dav('PUT', path, 'setup', page(n), { 'Content-Type': 'text/html' }), [201], `PUT ${path}`);
    paths.push(path);
  }
  return { dir, paths };
}

export function teardown(data) {
  removeCollection(data.dir);
}

export default function (data) {
  const path = data.paths[Math.floor(Math.random() * data.paths.length)];
  expect(dav('GET', path, 'markdown', null, { Accept: 'text/markdown' }), 'GET Markdown', {
    '200': (r) => r.status === 200,
    'text/markdown': (r) => (r.headers['Content-Type'] || '').startsWith('text/markdown'),
    'converted': (r) => r.body.includes('## Section 39') && !r.body.includes('<script'),
  });
}
