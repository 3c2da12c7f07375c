/**
 * The address frontends use to reach this sidecar's gRPC ingress (`grpc_address` in load events).
 * The listen address is often a wildcard (0.0.0.0) and its port often 0, neither of which a
 * frontend on another machine can dial, so the advertised address is resolved once the ingress
 * is bound:
 *   host  --advertise-address's host if given; else the --listen host when it is a specific
 *         address (not 0.0.0.0, :: or empty); else the first non-internal IPv4 address of the
 *         machine's network interfaces; else 127.0.0.1.
 *   port  --advertise-address's port if given and not 0; else the port actually bound.
 */
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { isIPv6 } from 'node:net';
import type { HostPort } from '../../platform/config/host-port.js';

export const FALLBACK_ADVERTISE_HOST = '127.0.0.1';

/** 0.0.0.0, ::, [::] written any way (`0::0`, `::0`), or empty: "every interface", not dialable. */
export function isUnspecifiedHost(host: string): boolean {
  const h = host.trim();
  if (h === '' || h === '0.0.0.0') return true;
  return isIPv6(h) && /^[0:]+$/.test(h);
}

type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

/** The first non-internal IPv4 address, in the order the OS lists interfaces; undefined if none. */
export function firstExternalIPv4(interfaces: Interfaces = networkInterfaces()): string | undefined {
  for (const addresses of Object.values(interfaces)) {
    for (const info of addresses ?? []) {
      // Node 18.0-18.3 reported family as the number 4.
      const family = info.family as string | number;
      if ((family === 'IPv4' || family === 4) && !info.internal) return info.address;
    }
  }
  return undefined;
}

/**
 * Resolves the advertised address once the ingress is bound. `interfaces` is injectable for
 * tests; it is read only when the host has to be guessed.
 */
export function resolveAdvertiseAddress(
  configured: HostPort | undefined,
  listenHost: string,
  boundPort: number,
  interfaces: () => Interfaces = networkInterfaces,
): HostPort {
  const port = configured !== undefined && configured.port !== 0 ? configured.port : boundPort;
  if (configured !== undefined) return { host: configured.host, port };
  if (!isUnspecifiedHost(listenHost)) return { host: listenHost, port };
  return { host: firstExternalIPv4(interfaces()) ?? FALLBACK_ADVERTISE_HOST, port };
}
