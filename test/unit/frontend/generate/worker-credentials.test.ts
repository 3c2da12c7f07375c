// What a new client to a sidecar connects with: plaintext, or TLS from the files current now.
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WorkerCredentials } from '../../../../src/frontend/generate/worker-credentials.js';
import type { ClientTls } from '../../../../src/platform/tls/client-tls.js';

/** The part of ClientTls the credentials read: its current files, their generation, the server name. */
function fakeTls(material: { ca?: Buffer; cert?: Buffer; key?: Buffer }, serverName?: string): ClientTls & { generation: number } {
  return { generation: 1, material, config: { serverName } } as unknown as ClientTls & { generation: number };
}

const secure = (credentials: grpc.ChannelCredentials) => credentials._isSecure();

afterEach(() => {
  vi.restoreAllMocks();
});

describe('WorkerCredentials', () => {
  it('without TLS: insecure credentials, no channel options, and a generation that never changes', () => {
    const credentials = new WorkerCredentials(undefined);
    const channel = credentials.channel();
    expect(secure(channel.credentials)).toBe(false);
    expect(channel.options).toEqual({});
    expect(credentials.generation).toBe(0);
  });

  it('with TLS and only the system CAs: secure credentials, and no name override', () => {
    const channel = new WorkerCredentials(fakeTls({})).channel();
    expect(secure(channel.credentials)).toBe(true);
    expect(channel.options).toEqual({});
  });

  it('hands grpc-js the CA, and the key and certificate in that order when both are present', () => {
    const createSsl = vi.spyOn(grpc.credentials, 'createSsl').mockReturnValue(grpc.credentials.createInsecure());
    const [ca, cert, key] = [Buffer.from('ca'), Buffer.from('cert'), Buffer.from('key')];
    new WorkerCredentials(fakeTls({ ca, cert, key })).channel();
    expect(createSsl).toHaveBeenLastCalledWith(ca, key, cert);
  });

  it('sends no client identity when only one of the certificate and key is there', () => {
    const createSsl = vi.spyOn(grpc.credentials, 'createSsl').mockReturnValue(grpc.credentials.createInsecure());
    new WorkerCredentials(fakeTls({ cert: Buffer.from('cert') })).channel();
    expect(createSsl).toHaveBeenLastCalledWith(null, null, null);
    new WorkerCredentials(fakeTls({ key: Buffer.from('key') })).channel();
    expect(createSsl).toHaveBeenLastCalledWith(null, null, null);
  });

  it('with a server name, sends it as SNI and authority, which grpc-js then verifies', () => {
    const channel = new WorkerCredentials(fakeTls({}, 'sidecar.internal')).channel();
    expect(channel.options).toEqual({ 'grpc.ssl_target_name_override': 'sidecar.internal', 'grpc.default_authority': 'sidecar.internal' });
  });

  it('follows the TLS generation, and reads the files current at each channel() call', () => {
    const createSsl = vi.spyOn(grpc.credentials, 'createSsl').mockReturnValue(grpc.credentials.createInsecure());
    const tls = fakeTls({ ca: Buffer.from('old') });
    const credentials = new WorkerCredentials(tls);
    expect(credentials.generation).toBe(1);
    credentials.channel();
    Object.assign(tls, { generation: 2, material: { ca: Buffer.from('new') } });
    expect(credentials.generation).toBe(2);
    credentials.channel();
    expect(createSsl.mock.calls.map(([ca]) => ca?.toString())).toEqual(['old', 'new']);
  });
});
