/**
 * One TLS listener's certificate: read at startup, handed to the server's constructor, then kept
 * fresh with `setSecureContext` (new handshakes get the new certificate; connections already
 * open keep theirs and their calls run on), with the listener's metrics.
 *
 *   const tls = ServerTls.load(config.tls.ingress, 'ingress', { intervalMs, logger, metrics });
 *   const server = http2.createSecureServer({ ...tls.serverOptions, ...own });
 *   tls.serve(server);  ...  tls.close();
 */
import type { SecureContextOptions, TlsOptions } from 'node:tls';
import type { Logger } from '../log.js';
import { CertReloader } from './cert-reloader.js';
import { describeCertificate, readTlsMaterialSync, validityProblem, type TlsMaterial } from './pem-files.js';
import type { TlsMetrics } from './tls-metrics.js';
import type { ServerTlsConfig } from './tls-options.js';

/** What ServerTls needs of node's tls.Server, http2's and https' servers. */
export interface ReloadableTlsServer {
  setSecureContext(options: SecureContextOptions): void;
  on(event: 'tlsClientError', listener: (err: Error, socket: { remoteAddress?: string | undefined }) => void): unknown;
}

export interface TlsDeps {
  /** --tls-reload-interval-ms: between two reads of the files; 0: never. */
  readonly intervalMs: number;
  readonly logger: Logger;
  readonly metrics: TlsMetrics;
}

export class ServerTls {
  private reloader: CertReloader | undefined;

  private constructor(
    private readonly config: ServerTlsConfig,
    private readonly label: string,
    private readonly initial: TlsMaterial,
    private readonly deps: TlsDeps,
  ) {}

  /** Reads and checks the files (TlsFileError when they do not check out: they did at config time). */
  static load(config: ServerTlsConfig, label: string, deps: TlsDeps): ServerTls {
    return new ServerTls(config, label, readTlsMaterialSync(config), deps);
  }

  /** For the server's constructor: the certificate now, and mTLS when a client CA is set. */
  get serverOptions(): TlsOptions {
    const requireClientCert = this.config.caFile !== undefined;
    return { ...contextOptions(this.reloader?.current ?? this.initial), requestCert: requireClientCert, rejectUnauthorized: requireClientCert };
  }

  /** Starts keeping `server`'s certificate fresh and counting its failed handshakes. */
  serve(server: ReloadableTlsServer): void {
    const { logger, metrics } = this.deps;
    const label = this.label;
    this.reloader = new CertReloader({
      label,
      files: this.config,
      intervalMs: this.deps.intervalMs,
      initial: this.initial,
      apply: (material) => server.setSecureContext(contextOptions(material)),
      logger,
      metrics,
    });
    server.on('tlsClientError', (err, socket) => {
      metrics.handshakeFailed(label);
      logger.debug('TLS handshake failed', { listener: label, remote: socket.remoteAddress, reason: err.message });
    });
    const leaf = this.initial.leaf!;
    logger.info('TLS on', { listener: label, client_certificates: this.config.caFile === undefined ? 'not asked' : 'required', ...describeCertificate(leaf) });
    const problem = validityProblem(leaf, Date.now());
    if (problem) logger.warn(`TLS ${label}: the certificate is not valid now: ${problem}`, { listener: label });
    this.reloader.start();
  }

  close(): void {
    this.reloader?.stop();
  }
}

/** The secure context of some material: what setSecureContext takes. */
function contextOptions(material: TlsMaterial): SecureContextOptions {
  return { cert: material.cert, key: material.key, ...(material.ca ? { ca: material.ca } : {}) };
}
