/** The advertised gRPC address (grpc_address in load events): the default rule and its edge cases. */
import type { NetworkInterfaceInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { firstExternalIPv4, isUnspecifiedHost, resolveAdvertiseAddress } from '../../../../src/sidecar/config/advertise-address.js';

type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

const iface = (address: string, family: 'IPv4' | 'IPv6', internal: boolean): NetworkInterfaceInfo =>
  ({ address, family, internal, netmask: '', mac: '00:00:00:00:00:00', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) }) as NetworkInterfaceInfo;

const MACHINE: Interfaces = {
  lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)],
  eth0: [iface('fe80::1', 'IPv6', false), iface('10.1.2.3', 'IPv4', false)],
  eth1: [iface('192.168.0.9', 'IPv4', false)],
};
const LOOPBACK_ONLY: Interfaces = { lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)] };

describe('resolveAdvertiseAddress', () => {
  it('uses the listen host when it is a specific address, with the port actually bound', () => {
    const never = (): Interfaces => {
      throw new Error('interfaces must not be read when the listen host is specific');
    };
    expect(resolveAdvertiseAddress(undefined, '127.0.0.1', 41234, never)).toEqual({ host: '127.0.0.1', port: 41234 });
    expect(resolveAdvertiseAddress(undefined, 'worker-7.local', 50050, never)).toEqual({ host: 'worker-7.local', port: 50050 });
    expect(resolveAdvertiseAddress(undefined, '::1', 50050, never)).toEqual({ host: '::1', port: 50050 });
  });

  it.each(['0.0.0.0', '::', '0::0', '::0', ''])('guesses the first non-internal IPv4 address for the wildcard %j', (host) => {
    expect(resolveAdvertiseAddress(undefined, host, 50050, () => MACHINE)).toEqual({ host: '10.1.2.3', port: 50050 });
  });

  it('falls back to 127.0.0.1 on a machine with only loopback interfaces (or none)', () => {
    expect(resolveAdvertiseAddress(undefined, '0.0.0.0', 7, () => LOOPBACK_ONLY)).toEqual({ host: '127.0.0.1', port: 7 });
    expect(resolveAdvertiseAddress(undefined, '0.0.0.0', 7, () => ({}))).toEqual({ host: '127.0.0.1', port: 7 });
  });

  it('uses a configured address as given, and its port 0 as the port actually bound', () => {
    expect(resolveAdvertiseAddress({ host: 'sidecar.example', port: 443 }, '0.0.0.0', 50050, () => MACHINE)).toEqual({ host: 'sidecar.example', port: 443 });
    expect(resolveAdvertiseAddress({ host: '10.9.9.9', port: 0 }, '127.0.0.1', 41234, () => MACHINE)).toEqual({ host: '10.9.9.9', port: 41234 });
  });
});

describe('firstExternalIPv4 and isUnspecifiedHost', () => {
  it('skips internal and IPv6 addresses, in interface order; accepts the numeric family of older Node', () => {
    expect(firstExternalIPv4(MACHINE)).toBe('10.1.2.3');
    expect(firstExternalIPv4(LOOPBACK_ONLY)).toBeUndefined();
    const legacy = { eth0: [{ ...iface('10.0.0.2', 'IPv4', false), family: 4 as unknown as 'IPv4' }] };
    expect(firstExternalIPv4(legacy)).toBe('10.0.0.2');
  });

  it('knows the wildcard hosts and nothing else', () => {
    for (const host of ['0.0.0.0', '::', '0:0:0:0:0:0:0:0', ' ', '']) expect(isUnspecifiedHost(host), host).toBe(true);
    for (const host of ['127.0.0.1', '::1', 'localhost', '10.0.0.0', '0.0.0.1', 'fe80::']) expect(isUnspecifiedHost(host), host).toBe(false);
  });
});
