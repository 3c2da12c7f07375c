/**
 * gRPC clients to the workers' sidecars: one grpc-js client (one HTTP/2 connection) per
 * address, created on the first call to it and kept for the next ones, since opening a
 * connection per request would cost a TCP and HTTP/2 handshake each time. The rest of the
 * frontend sees only `GenerateCall`, the part of grpc-js's server-stream call it uses, so
 * tests can stand in a scripted call.
 */
import * as grpc from '@grpc/grpc-js';
import type { GenerateRequestMessage, GenerateResponseMessage } from '../../protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../protocol/engine/engine-services.js';
import { DP_RANK_HEADER } from '../../protocol/load-event.js';
import { PRIORITY_HEADER, SLO_TTFT_HEADER, TENANT_HEADER } from '../../protocol/request-class.js';
import type { RouteTarget } from '../routing/contracts.js';
import type { GrpcStatus } from '../../protocol/grpc/status.js';
import { WorkerCredentials } from './worker-credentials.js';

/** How a call ends: grpc-js's status (code 0 = OK), with its trailers. */
export interface CallStatus {
  readonly code: GrpcStatus;
  readonly details: string;
  /** The trailers (grpc-js's Metadata): a refusal's grpc-retry-pushback-ms is read from them. */
  readonly metadata?: { get(key: string): unknown[] };
}

/** One Generate call in flight (what grpc-js's ClientReadableStream offers that we use). */
export interface GenerateCall {
  on(event: 'data', listener: (message: GenerateResponseMessage) => void): unknown;
  /** Fires exactly once, after the last 'data', however the call ends. */
  on(event: 'status', listener: (status: CallStatus) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** Ends the call at once (RST_STREAM CANCEL); the sidecar frees its slot. Idempotent. */
  cancel(): void;
}

/** The request's class as sent to the sidecar (src/protocol/request-class.ts). */
export interface CallClass {
  /** Sent as `x-request-priority`, always. */
  readonly priority: number;
  /** Sent as `x-tenant-id` when given. */
  readonly tenant?: string;
  /** What is left of the request's TTFT SLO, sent as `x-slo-ttft-ms` when there is one. */
  readonly ttftSloMs?: number;
}

export interface WorkerClients {
  /**
   * Starts Generate on the target's sidecar, with its dp rank in the request and as
   * `x-data-parallel-rank`, and the request's class as `x-request-priority` and `x-tenant-id`.
   */
  generate(target: RouteTarget, request: GenerateRequestMessage, callClass: CallClass): GenerateCall;
  /** Closes every client; calls still open end with CANCELLED/UNAVAILABLE. */
  close(): void;
}

export interface WorkerClientsOptions {
  /** Deadline of each Generate call, in ms from its start; undefined = none. */
  readonly requestDeadlineMs?: number;
  /** Extra grpc-js channel options (keepalive and the like). */
  readonly channelOptions?: grpc.ChannelOptions;
  /** Wall clock for deadlines (grpc-js deadlines are absolute Date.now() times). */
  readonly now?: () => number;
  /** Plaintext or TLS (--worker-tls); default plaintext. */
  readonly credentials?: WorkerCredentials;
}

type GenerateMethod = (
  request: GenerateRequestMessage,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
) => grpc.ClientReadableStream<GenerateResponseMessage>;

export class GrpcWorkerClients implements WorkerClients {
  private readonly clients = new Map<string, grpc.Client>();
  /** The credentials' generation each client was made with. */
  private readonly generations = new Map<string, number>();
  private readonly now: () => number;
  private readonly credentials: WorkerCredentials;
  private closed = false;

  constructor(private readonly options: WorkerClientsOptions = {}) {
    this.now = options.now ?? Date.now;
    this.credentials = options.credentials ?? new WorkerCredentials(undefined);
  }

  generate(target: RouteTarget, request: GenerateRequestMessage, callClass: CallClass): GenerateCall {
    if (this.closed) throw new Error('worker clients are closed');
    const client = this.client(target.address);
    const metadata = new grpc.Metadata();
    metadata.set(DP_RANK_HEADER, String(target.dpRank));
    metadata.set(PRIORITY_HEADER, String(callClass.priority));
    if (callClass.tenant !== undefined) metadata.set(TENANT_HEADER, callClass.tenant);
    if (callClass.ttftSloMs !== undefined) metadata.set(SLO_TTFT_HEADER, String(Math.max(1, Math.round(callClass.ttftSloMs))));
    const callOptions: grpc.CallOptions = {};
    if (this.options.requestDeadlineMs !== undefined) callOptions.deadline = this.now() + this.options.requestDeadlineMs;
    const method = (client as unknown as { Generate: GenerateMethod }).Generate;
    const call = method.call(client, { ...request, data_parallel_rank: target.dpRank }, metadata, callOptions);
    // 'status' carries every ending; without an 'error' listener a failed call would throw.
    call.on('error', () => {});
    return call;
  }

  close(): void {
    this.closed = true;
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  private client(address: string): grpc.Client {
    let client = this.clients.get(address);
    const generation = this.credentials.generation;
    // TLS files reloaded since this client was made: new calls get a new client with the new files.
    if (client !== undefined && this.generations.get(address) !== generation) {
      client.close();
      client = undefined;
    }
    if (client === undefined) {
      const Ctor = vllmEngineService();
      const channel = this.credentials.channel();
      client = new Ctor(address, channel.credentials, { ...channel.options, ...this.options.channelOptions });
      this.clients.set(address, client);
      this.generations.set(address, generation);
    }
    return client;
  }
}
