/**
 * Learns what the engine is (its model, KV geometry, max_num_seqs, max batched tokens, dp size and
 * first rank, and how it streams) through whichever RPCs its protocol has (engine-facts.ts), at
 * start and again after every reconnect: a restarted engine may come back with another model or
 * another KV size.
 *
 *   const d = new EngineDiscovery({ engine: upstreamPool, wire, logger });
 *   d.onFacts((facts, { complete }) => ...);  d.start();  ...  d.stop();
 *
 * Each question is an EngineQuestion (asked until answered, outside the admission gate). A
 * round is complete when every question was answered or found UNIMPLEMENTED. An RPC the engine
 * does not implement leaves its facts unknown, with one warning for the sidecar's lifetime.
 * Listeners hear the facts merged so far after each answer (a later answer wins per fact), with
 * `complete` set on the round's last one. Every new connection to the engine after the first
 * (a restart, a network break, a GOAWAY) starts a new round once the current one is complete;
 * facts from the old one are kept until replaced. A capacity fact out of its flag's range is
 * not learned (learned-bounds.ts): the last good value stands, and the field is warned about once.
 */
import { factQuestions, type EngineFacts } from '../../protocol/engine/engine-facts.js';
import type { GenerateWire } from '../../protocol/engine/generate-wire.js';
import type { Logger } from '../../platform/log.js';
import { EngineQuestion, type QuestionedEngine } from './engine-question.js';
import { LearnedValueCheck } from './learned-bounds.js';

export type EngineFactsListener = (facts: Readonly<EngineFacts>, round: { readonly complete: boolean; readonly round: number }) => void;

export interface EngineDiscoveryOptions {
  readonly engine: QuestionedEngine;
  readonly wire: GenerateWire;
  readonly logger: Logger;
  readonly timeoutMs?: number | undefined;
  readonly retryMs?: number | undefined;
}

export class EngineDiscovery {
  private facts: EngineFacts = {};
  private questions: EngineQuestion[] = [];
  private pending = 0;
  private roundNumber = 0;
  private stopped = true;
  private unsubscribe: (() => void) | undefined;
  private readonly listeners = new Set<EngineFactsListener>();
  private readonly unimplementedWarned = new Set<string>();
  private readonly bounds: LearnedValueCheck;

  constructor(private readonly options: EngineDiscoveryOptions) {
    this.bounds = new LearnedValueCheck(options.logger);
  }

  /** The facts learned so far (merged over rounds). */
  get known(): Readonly<EngineFacts> {
    return this.facts;
  }

  /** Rounds started so far: 1 after start(), one more per reconnect. */
  get rounds(): number {
    return this.roundNumber;
  }

  /** The current round has its every answer. */
  get complete(): boolean {
    return this.roundNumber > 0 && this.pending === 0;
  }

  onFacts(listener: EngineFactsListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.unsubscribe = this.options.engine.onReconnect(() => {
      // Perhaps another engine now: ask again. A round still running asks the new connection anyway.
      if (this.pending === 0) this.startRound();
    });
    this.startRound();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const q of this.questions) q.stop();
    this.questions = [];
  }

  private startRound(): void {
    const round = ++this.roundNumber;
    const log = this.options.logger;
    const asked = factQuestions(this.options.wire);
    this.pending = asked.length;
    this.questions = asked.map(
      (question) =>
        new EngineQuestion({
          engine: this.options.engine,
          path: question.path,
          what: `its ${question.rpc}`,
          logger: log,
          timeoutMs: this.options.timeoutMs,
          retryMs: this.options.retryMs,
          decide: (body, attempts) => {
            if (body === undefined) {
              if (!this.unimplementedWarned.has(question.path)) {
                this.unimplementedWarned.add(question.path);
                log.warn(`the engine does not implement ${question.rpc}: what it would tell stays unknown (pass the flags instead)`, { path: question.path });
              }
            } else {
              let learned: EngineFacts;
              try {
                learned = question.read(body, (fact, field, value) => this.bounds.accept(fact, field, value));
              } catch (err) {
                throw new Error(`undecodable ${question.rpc} answer: ${(err as Error).message}`);
              }
              this.facts = { ...this.facts, ...learned };
              log.info(`engine facts from ${question.rpc}`, { ...learned, round, attempts });
            }
            this.pending--;
            const complete = this.pending === 0;
            for (const listener of this.listeners) listener(this.facts, { complete, round });
          },
        }),
    );
    for (const q of this.questions) q.start();
  }
}
