/** The CLI entry: the `dynamo-frontend` bin is `dynamo-sidecar frontend`. */
import { describe, expect, it } from 'vitest';
import { argvFor } from '../../../src/cli/main.js';

describe('argvFor', () => {
  it('the dynamo-frontend bin is the frontend command', () => {
    expect(argvFor('/usr/lib/node_modules/dynamo-sidecar/bin/dynamo-frontend', ['--help'])).toEqual(['frontend', '--help']);
    expect(argvFor('/usr/bin/dynamo-sidecar', ['--help'])).toEqual(['--help']);
  });
});
