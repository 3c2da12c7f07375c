/**
 * Traffic accounting on Generate calls (docs/architecture.md, "Load events"): reads just enough of the bytes passing
 * through to tell the LoadTracker a call's prompt size and its output so far. The proxy forwards
 * first and taps after, and anything that does not decode is counted and left alone: the call
 * itself is never touched.
 *
 * Which calls and how: only the Generate RPCs of the configured --generate-wire protocol
 * (ENGINE_PATHS; never guessed from the bytes), decoded with its layout.
 *
 * A call's dp rank, in this order: the rank the request itself pins (SMG's vLLM
 * `data_parallel_rank` 9, SMG's SGLang 16, SGLang's `routed_dp_rank` 10), since that is what the
 * engine obeys; else the
 * `x-data-parallel-rank` header (Dynamo's sidecars), else our older `x-dynamo-dp-rank`; else 0.
 * A rank that is not one of this worker's ranks (header or field) counts in
 * `invalidRanks` and the call goes on rank 0.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import type { TrafficTap } from '../proxy/call-context.js';
import {
  ENGINE_PATHS,
  decodeGenerateRequest,
  decodeGenerateResponse,
  type GenerateRequestInfo,
  type GenerateWire,
} from '../../protocol/engine/generate-wire.js';
import { GrpcFrameReader } from '../../protocol/grpc/grpc-frames.js';
import { parseDpRankHeader, type CallLoad, type LoadTracker } from './load-tracker.js';
import { DP_RANK_HEADER, LEGACY_DP_RANK_HEADER } from '../../protocol/load-event.js';

export class TrafficAccounting {
  /** Messages seen on Generate calls that could not be decoded (compressed, oversized, malformed). */
  unparsedMessages = 0;
  /** Calls whose dp-rank header or field was not a rank of this worker (counted on rank 0). */
  invalidRanks = 0;
  /** Output tokens seen on all Generate calls, for tokens/s. */
  outputTokens = 0;

  /** Told the output of each call that completed (the engine sent its final message), for the learned output lengths of --ttft-slo-ms. */
  onCompleted: ((outputTokens: number) => void) | undefined;

  /** sglang-native: output_ids are all ids so far (SGLang's default), not deltas; set from what the engine tells. */
  cumulativeOutputIds = true;

  private readonly generatePaths: readonly string[];

  constructor(
    private readonly tracker: LoadTracker,
    readonly wire: GenerateWire,
  ) {
    this.generatePaths = ENGINE_PATHS[wire].generate;
  }

  /** A tap for the engine's Generate calls; undefined (no cost) for every other method. */
  tap(headers: IncomingHttpHeaders): TrafficTap | undefined {
    const path = headers[':path'];
    if (path === undefined || !this.generatePaths.includes(path)) return undefined;
    const header = headers[DP_RANK_HEADER] ?? headers[LEGACY_DP_RANK_HEADER];
    const { rank, valid } = parseDpRankHeader(header, this.tracker.dataParallelSize);
    // An invalid header is counted only if the request does not pin a rank itself (startCall).
    return new GenerateCallTap(this, rank, valid);
  }

  /** @internal for GenerateCallTap */
  startCall(headerRank: number, headerValid: boolean, info: GenerateRequestInfo): CallLoad {
    let rank = headerRank;
    let valid = headerValid;
    if (info.dataParallelRank !== undefined) {
      valid = info.dataParallelRank < this.tracker.dataParallelSize;
      rank = valid ? info.dataParallelRank : 0;
    }
    if (!valid) this.invalidRanks++;
    return this.tracker.callStarted(rank, info.promptTokens, info.maxTokens);
  }
}

class GenerateCallTap implements TrafficTap {
  private readonly requestFrames = new GrpcFrameReader();
  private responseFrames: GrpcFrameReader | undefined;
  private load: CallLoad | undefined;
  private outputSoFar = 0;
  private ended = false;
  private completed = false;

  constructor(
    private readonly accounting: TrafficAccounting,
    private readonly headerRank: number,
    private readonly headerValid: boolean,
  ) {}

  request(chunk: Buffer): void {
    // Only the first request message matters (Generate is server-streaming).
    if (this.load || this.ended) return;
    for (const frame of this.requestFrames.push(chunk)) {
      const info = frame.kind === 'message' ? decodeGenerateRequest(frame.payload, this.accounting.wire) : undefined;
      if (!info) {
        this.accounting.unparsedMessages++;
        this.ended = true; // cannot account this call; stop looking at it
        return;
      }
      this.load = this.accounting.startCall(this.headerRank, this.headerValid, info);
      this.responseFrames = new GrpcFrameReader();
      return;
    }
  }

  response(chunk: Buffer): void {
    if (!this.load || this.ended) return;
    for (const frame of this.responseFrames!.push(chunk)) {
      const info = frame.kind === 'message' ? decodeGenerateResponse(frame.payload, this.accounting.wire, this.accounting) : undefined;
      if (!info) {
        this.accounting.unparsedMessages++;
        continue;
      }
      if (info.kind !== 'chunk' && info.kind !== 'complete') continue;
      if (info.kind === 'complete') this.completed = true;
      // The engine's running total wins; else the message's tokens are the output so far, or new ones.
      const total = info.completionTokens ?? (info.cumulative ? info.tokens : this.outputSoFar + info.tokens);
      if (total > this.outputSoFar) {
        this.accounting.outputTokens += total - this.outputSoFar;
        this.outputSoFar = total;
      }
      this.load.output(this.outputSoFar, { cumulative: true });
    }
  }

  end(): void {
    this.ended = true;
    this.load?.end();
    if (this.completed) this.accounting.onCompleted?.(this.outputSoFar);
    this.completed = false;
  }
}
