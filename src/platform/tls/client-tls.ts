/**
 * One TLS client's files (the sidecar to its engine, the frontend to the sidecars): read at
 * startup, re-read when they change (cert-reloader.ts). Each new connection takes the material
 * current at that moment; connections already open keep theirs, so a rotation never cuts a call.
 *
 *   const tls = ClientTls.load(config.tls.upstream, 'upstream-client', { intervalMs, logger, metrics });
 *   tls.start();  tls.connectOptions('10.0.0.5')  ...  tls.close();
 */
import { isIP } from 'node:net';
import { checkServerIdentity, type ConnectionOptions } from 'node:tls';
import { CertReloader } from './cert-reloader.js';
import { describeCertificate, readTlsMaterialSync, type TlsMaterial } from './pem-files.js';
import type { TlsDeps } from './server-tls.js';
import type { ClientTlsConfig } from './tls-options.js';

export class ClientTls {
  private readonly reloader: CertReloader;

  private constructor(
    readonly config: ClientTlsConfig,
    private readonly label: string,
    initial: TlsMaterial,
    private readonly deps: TlsDeps,
  ) {
    this.reloader = new CertReloader({
      label,
      files: config,
      intervalMs: deps.intervalMs,
      initial,
      apply: () => {},
      logger: deps.logger,
      metrics: deps.metrics,
    });
  }

  /** Reads and checks the files (TlsFileError when they do not check out: they did at config time). */
  static load(config: ClientTlsConfig, label: string, deps: TlsDeps): ClientTls {
    return new ClientTls(config, label, readTlsMaterialSync(config), deps);
  }

  /** The material new connections use. */
  get material(): TlsMaterial {
    return this.reloader.current;
  }

  /** Changes when new material was taken: clients holding connections built from older material may rebuild them. */
  get generation(): number {
    return this.reloader.generation;
  }

  /** Options of tls.connect for a new connection to `host`: CA, client certificate, SNI and the name verified. */
  connectOptions(host: string): ConnectionOptions {
    const { ca, cert, key } = this.material;
    const name = this.config.serverName;
    const sni = name ?? host;
    return {
      ...(ca ? { ca } : {}),
      ...(cert && key ? { cert, key } : {}),
      // SNI carries host names only; an address is still verified against the certificate's IP SANs.
      ...(isIP(sni) ? {} : { servername: sni }),
      ...(name === undefined
        ? {}
        : { checkServerIdentity: (_host: string, peer: Parameters<typeof checkServerIdentity>[1]) => checkServerIdentity(name, peer) }),
    };
  }

  /** Counts a handshake with the server that failed (untrusted certificate, wrong name, refused client certificate). */
  handshakeFailed(): void {
    this.deps.metrics.handshakeFailed(this.label);
  }

  start(): void {
    const { leaf } = this.material;
    this.deps.logger.info('TLS to', {
      listener: this.label,
      ca: this.config.caFile ?? 'system',
      ...(this.config.serverName === undefined ? {} : { server_name: this.config.serverName }),
      ...(leaf ? describeCertificate(leaf) : { client_certificate: 'none' }),
    });
    this.reloader.start();
  }

  close(): void {
    this.reloader.stop();
  }
}
