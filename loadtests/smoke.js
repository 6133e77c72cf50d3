// smoke: every method once, in a collection of its own, checked the way a WebDAV client
// relies on it. One VU, one iteration; any failed check or request fails the run.

import http from 'k6/http';
import { BASE, dav, expect, runCollection, LOCKINFO, PROPFIND_ALLPROP } from './lib/dav.js';

export const options = {
  vus: 1,
  iterations: 1,
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    // One request at a time on an idle server (docs/loadtests.md).
    http_req_duration: ['p(95)<250', 'max<1000'],
  },
};

export default function () {
  const dir = runCollection('smoke');
  const file = `${dir}/hello.txt`;

  expect(dav('OPTIONS', '/', 'options'), 'OPTIONS', {
    '200': (r) => r.status === 200,
    'DAV 1, 2': (r) => /\b1\b/.test(r.headers.Dav || '') && /\b2\b/.test(r.headers.Dav || ''),
  });
  expect(dav('MKCOL', `${dir}/`, 'mkcol'), 'MKCOL', { '201': (r) => r.status === 201 });
  expect(dav('PUT', file, 'put', 'hello, k6\n'), 'PUT', { '201': (r) => r.status === 201 });
  expect(dav('GET', file, 'get'), 'GET', {
    '200': (r) => r.status === 200,
    'body': (r) => r.body === 'hello, k6\n',
    'ETag': (r) => !!r.headers.Etag,
  });
  expect(dav('HEAD', file, 'head'), 'HEAD', {
    '200': (r) => r.status === 200,
    'length': (r) => r.headers['Content-Length'] === '10',
  });
  expect(dav('GET', file, 'get', null, { Range: 'bytes=0-4' }), 'GET Range', {
    '206': (r) => r.status === 206,
    'body': (r) => r.body === 'hello',
  });
  expect(dav('PROPFIND', file, 'propfind', PROPFIND_ALLPROP, { Depth: '0' }), 'PROPFIND 0', {
    '207': (r) => r.status === 207,
    'getcontentlength': (r) => /getcontentlength>10</.test(r.body),
  });
  expect(dav('PROPPATCH', file, 'proppatch',
    '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:k="urn:k6">' +
    '<D:set><D:prop><k:color>blue</k:color></D:prop></D:set></D:propertyupdate>'), 'PROPPATCH', {
    '207': (r) => r.status === 207,
    'set': (r) => /200 OK/.test(r.body),
  });
  expect(dav('PROPFIND', `${dir}/`, 'propfind', PROPFIND_ALLPROP, { Depth: '1' }), 'PROPFIND 1', {
    '207': (r) => r.status === 207,
    'lists the file': (r) => r.body.includes('hello.txt'),
  });
  expect(dav('COPY', file, 'copy', null, { Destination: `${BASE}${dir}/copy.txt` }), 'COPY', {
    '201': (r) => r.status === 201,
  });
  expect(dav('MOVE', `${dir}/copy.txt`, 'move', null, { Destination: `${BASE}${dir}/moved.txt` }), 'MOVE', {
    '201': (r) => r.status === 201,
  });
  const lock = dav('LOCK', file, 'lock', LOCKINFO, { Timeout: 'Second-60' });
  expect(lock, 'LOCK', {
    '200': (r) => r.status === 200,
    'Lock-Token': (r) => /^<.+>$/.test(r.headers['Lock-Token'] || ''),
  });
  const token = lock.headers['Lock-Token'] || '<missing>';
  expect(dav('PUT', file, 'put', 'locked edit\n', { If: `(${token})` }), 'PUT under lock', {
    '204': (r) => r.status === 204,
  });
  expect(dav('UNLOCK', file, 'unlock', null, { 'Lock-Token': token }), 'UNLOCK', {
    '204': (r) => r.status === 204,
  });
  dav('PUT', `${dir}/page.html`, 'put', '<html><body><h1>Agents</h1><p>read <b>this</b></p></body></html>');
  expect(dav('GET', `${dir}/page.html`, 'markdown', null, { Accept: 'text/markdown' }), 'GET Markdown', {
    '200': (r) => r.status === 200,
    'text/markdown': (r) => (r.headers['Content-Type'] || '').startsWith('text/markdown'),
    'converted': (r) => r.body.includes('# Agents'),
  });
  expect(dav('GET', `${dir}/`, 'listing', null, { Accept: 'text/html' }), 'GET listing', {
    '200': (r) => r.status === 200,
    'lists the page': (r) => r.body.includes('page.html'),
  });
  expect(dav('DELETE', `${dir}/`, 'delete'), 'DELETE', { '204': (r) => r.status === 204 });
  expect(dav('GET', file, 'get', null, {}, { responseCallback: http.expectedStatuses(404) }), 'GET after DELETE', {
    '404': (r) => r.status === 404,
  });
}
