/**
 * What a new grpc-js client to a sidecar connects with: plaintext, or TLS (--worker-tls) with the
 * files current now. grpc-js fixes a client's credentials when it is made, so after a rotation
 * (`generation` changed) the owners make new clients for new calls and close the old ones, whose
 * calls already running finish on their connection (grpc-js's close() cancels only calls not
 * yet started).
 */
import * as grpc from '@grpc/grpc-js';
import type { ClientTls } from '../../platform/tls/client-tls.js';

export interface WorkerChannel {
  readonly credentials: grpc.ChannelCredentials;
  readonly options: grpc.ChannelOptions;
}

export class WorkerCredentials {
  constructor(private readonly tls: ClientTls | undefined) {}

  /** Changes when the TLS files were reloaded; never for plaintext. */
  get generation(): number {
    return this.tls?.generation ?? 0;
  }

  channel(): WorkerChannel {
    if (this.tls === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
    const { ca, cert, key } = this.tls.material;
    const name = this.tls.config.serverName;
    return {
      credentials: grpc.credentials.createSsl(ca ?? null, cert && key ? key : null, cert && key ? cert : null),
      // grpc-js sends this name as SNI and verifies the sidecar's certificate against it.
      options: name === undefined ? {} : { 'grpc.ssl_target_name_override': name, 'grpc.default_authority': name },
    };
  }
}
