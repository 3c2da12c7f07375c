/**
 * Traffic accounting on Generate calls (docs/architecture.md, "Load events"): reads just enough of the bytes passing
 * through to tell the LoadTracker a call's prompt size and its output so far. The proxy forwards
 * first and taps after, and anything that does not decode is counted and left alone: the call
 * itself is never touched.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import type { TrafficTap } from '../proxy/call-context.js';
import { decodeGenerateRequest, decodeGenerateResponse, generateFlavorForPath, type GenerateFlavor } from '../../protocol/engine/generate-wire.js';
import { GrpcFrameReader } from '../../protocol/grpc/grpc-frames.js';
import { parseDpRankHeader, type CallLoad, type LoadTracker } from './load-tracker.js';
import { DP_RANK_HEADER } from '../../protocol/load-event.js';

export class TrafficAccounting {
  /** Messages seen on Generate calls that could not be decoded (compressed, oversized, malformed). */
  unparsedMessages = 0;
  /** Calls whose dp-rank header was not a rank of this worker (counted on rank 0). */
  invalidRankHeaders = 0;
  /** Output tokens seen on all Generate calls, for tokens/s. */
  outputTokens = 0;

  constructor(
    private readonly tracker: LoadTracker,
    private readonly dataParallelSize: number,
  ) {}

  /** A tap for Generate calls; undefined (no cost) for every other method. */
  tap(headers: IncomingHttpHeaders): TrafficTap | undefined {
    const flavor = generateFlavorForPath(headers[':path'] ?? '');
    if (!flavor) return undefined;
    const { rank, valid } = parseDpRankHeader(headers[DP_RANK_HEADER], this.dataParallelSize);
    if (!valid) this.invalidRankHeaders++;
    return new GenerateCallTap(this, flavor, rank);
  }

  /** @internal for GenerateCallTap */
  startCall(rank: number, promptTokens: number, maxTokens: number | undefined): CallLoad {
    return this.tracker.callStarted(rank, promptTokens, maxTokens);
  }
}

class GenerateCallTap implements TrafficTap {
  private readonly requestFrames = new GrpcFrameReader();
  private responseFrames: GrpcFrameReader | undefined;
  private load: CallLoad | undefined;
  private outputSoFar = 0;
  private ended = false;

  constructor(
    private readonly accounting: TrafficAccounting,
    private readonly flavor: GenerateFlavor,
    private readonly rank: number,
  ) {}

  request(chunk: Buffer): void {
    // Only the first request message matters (Generate is server-streaming).
    if (this.load || this.ended) return;
    for (const frame of this.requestFrames.push(chunk)) {
      const info = frame.kind === 'message' ? decodeGenerateRequest(frame.payload, this.flavor) : undefined;
      if (!info) {
        this.accounting.unparsedMessages++;
        this.ended = true; // cannot account this call; stop looking at it
        return;
      }
      this.load = this.accounting.startCall(this.rank, info.promptTokens, info.maxTokens);
      this.responseFrames = new GrpcFrameReader();
      return;
    }
  }

  response(chunk: Buffer): void {
    if (!this.load || this.ended) return;
    for (const frame of this.responseFrames!.push(chunk)) {
      const info = frame.kind === 'message' ? decodeGenerateResponse(frame.payload) : undefined;
      if (!info) {
        this.accounting.unparsedMessages++;
        continue;
      }
      if (info.kind !== 'chunk' && info.kind !== 'complete') continue;
      // Engines report a running completion_tokens; without it, chunks carry new tokens and
      // `complete` carries all output ids.
      const total = info.completionTokens ?? (info.kind === 'complete' ? info.tokens : this.outputSoFar + info.tokens);
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
  }
}
