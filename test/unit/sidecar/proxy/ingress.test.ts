/** The ingress at shutdown: calls still open are cut, queued ones first. */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/platform/log.js';
import type { CallContext } from '../../../../src/sidecar/proxy/call-context.js';
import { Ingress } from '../../../../src/sidecar/proxy/ingress.js';
import type { CallPhase, OpenCall } from '../../../../src/sidecar/proxy/call-phases.js';

describe('Ingress.cutOpenCalls', () => {
  it('cuts queued calls before calls in the engine, so no freed slot dispatches a queued call during shutdown', () => {
    const ingress = new Ingress({
      context: {} as CallContext,
      services: [],
      isDraining: () => true,
      maxConcurrentStreams: 10,
      idleTimeoutMs: 0,
      handshakeTimeoutMs: 1000,
      logger: silentLogger,
    });
    const cut: string[] = [];
    const call = (name: string, phase: CallPhase): OpenCall => {
      const fake = {
        phase,
        shutdown() {
          if (fake.phase === 'ended') return;
          fake.phase = 'ended';
          cut.push(name);
        },
      };
      return fake;
    };
    const openCalls = ingress.openCalls;
    for (const c of [call('streaming-1', 'streaming'), call('queued-1', 'queued'), call('awaiting-1', 'awaiting_response'), call('queued-2', 'queued')])
      openCalls.add(c);
    expect(ingress.cutOpenCalls()).toBe(4);
    expect(cut).toEqual(['queued-1', 'queued-2', 'streaming-1', 'awaiting-1']);
  });
});
