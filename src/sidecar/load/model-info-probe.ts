/**
 * Learns the served model (the `model` of load events) from the engine when no
 * --served-model-name is given: GetModelInfo of the --generate-wire service (vLLM's
 * vllm.grpc.engine.VllmEngine or SGLang's sglang.grpc.scheduler.SglangScheduler, whose
 * responses number served_model_name 6 and model_path 1 alike). served_model_name is the name
 * clients use; model_path (the weights' path or hub id) stands in when it is empty.
 *
 *   const probe = new ModelInfoProbe({ engine: upstreamPool, onModel: (name) => tracker.setModel(name), logger });
 *   probe.start();  ...  probe.stop();
 *
 * Asked as an EngineQuestion (until the engine answers, outside the admission gate). The answer
 * is logged once. Asking stops for good at the first answer: a model name; an answer with
 * neither name; or UNIMPLEMENTED (an engine without this service). In the last two cases the
 * model stays null and one warning says to pass --served-model-name.
 */
import { vllmEngineMessage } from '../../protocol/engine/engine-proto.js';
import { enginePath, type GenerateWire } from '../../protocol/engine/generate-wire.js';
import type { Logger } from '../../platform/log.js';
import { EngineQuestion, type QuestionedEngine } from './engine-question.js';

interface ModelInfoFields {
  model_path?: string;
  served_model_name?: string;
}

/** What the probe needs of the engine connection (UpstreamPool). */
export type ModelInfoEngine = QuestionedEngine;

export interface ModelInfoProbeOptions {
  readonly engine: ModelInfoEngine;
  /** Which engine service to ask; default vllm. */
  readonly wire?: GenerateWire;
  /** Called once, with a non-empty name. */
  readonly onModel: (name: string) => void;
  readonly logger: Logger;
  readonly timeoutMs?: number;
  readonly retryMs?: number;
}

export class ModelInfoProbe extends EngineQuestion {
  constructor(options: ModelInfoProbeOptions) {
    const response = vllmEngineMessage<ModelInfoFields>('GetModelInfoResponse');
    const path = enginePath(options.wire ?? 'vllm', 'GetModelInfo');
    const log = options.logger;
    super({
      engine: options.engine,
      path,
      what: 'its model',
      logger: log,
      timeoutMs: options.timeoutMs,
      retryMs: options.retryMs,
      decide: (body, attempts) => {
        if (body === undefined) {
          log.warn('the engine does not implement GetModelInfo: model unknown (null in load events); pass --served-model-name', { path });
          return;
        }
        let info: ModelInfoFields;
        try {
          info = response.deserialize(body);
        } catch (err) {
          throw new Error(`undecodable GetModelInfoResponse: ${(err as Error).message}`);
        }
        const name = (info.served_model_name ?? '').trim() || (info.model_path ?? '').trim();
        if (name === '') {
          log.warn('the engine answered GetModelInfo without served_model_name or model_path: model unknown (null in load events); pass --served-model-name', {
            attempts,
          });
          return;
        }
        log.info('served model from the engine', { model: name, attempts });
        options.onModel(name);
      },
    });
  }
}
