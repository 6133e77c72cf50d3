// webdav-mixed: 80 % GET, 15 % PROPFIND Depth 1, 5 % PUT on a 30-file collection, like
// the mixed scenario of the rshs report. Env: VUS (16), DURATION (30s).

import { mixed, mixedThresholds, setupMixed } from './lib/mixed.js';

export const options = {
  scenarios: {
    mixed: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS || 16),
      duration: __ENV.DURATION || '30s',
    },
  },
  thresholds: mixedThresholds(),
};

export function setup() {
  return setupMixed();
}

export default function (data) {
  mixed(data);
}
