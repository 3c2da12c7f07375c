/** `HOST:PORT` addresses as the CLI takes them: `127.0.0.1:50051`, `localhost:50051`, `[::1]:50051`. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

const HOST_PORT_RE = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/;

/** Parses `HOST:PORT`; returns a reason string on failure. `allowZero` permits port 0 (pick a free port). */
export function parseHostPort(value: string, allowZero: boolean): HostPort | string {
  const match = HOST_PORT_RE.exec(value.trim());
  if (!match) return `expected HOST:PORT (e.g. 127.0.0.1:50051 or [::1]:50051), got "${value}"`;
  const port = Number(match[3]);
  if (port > 65535 || (port === 0 && !allowZero)) return `port must be ${allowZero ? '0' : '1'}-65535, got ${port}`;
  return { host: match[1] ?? match[2]!, port };
}

/** Formats for logs and for node:http2 authorities; IPv6 literals get their brackets back. */
export function formatHostPort({ host, port }: HostPort): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
