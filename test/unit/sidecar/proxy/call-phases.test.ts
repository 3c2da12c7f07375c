/** call-phases: the transition table is a one-way road to 'ended', and the event table names every event the call handles. */
import { describe, expect, it } from 'vitest';
import { ACTS_IN, NEXT_PHASES, actsIn, isTransition, type CallPhase } from '../../../../src/sidecar/proxy/call-phases.js';
import { ProxiedCall } from '../../../../src/sidecar/proxy/proxied-call.js';

const PHASES = Object.keys(NEXT_PHASES) as CallPhase[];

/** Every phase reachable from `from` by one or more transitions. */
function reachable(from: CallPhase): Set<CallPhase> {
  const seen = new Set<CallPhase>();
  const todo = [...NEXT_PHASES[from]];
  for (let guard = 0; todo.length > 0 && guard < 100; guard++) {
    const next = todo.pop()!;
    if (!seen.has(next)) {
      seen.add(next);
      todo.push(...NEXT_PHASES[next]);
    }
  }
  return seen;
}

describe('NEXT_PHASES', () => {
  it('leads every live phase to ended, and nothing out of ended', () => {
    for (const phase of PHASES.filter((p) => p !== 'ended')) expect(reachable(phase).has('ended'), phase).toBe(true);
    expect(NEXT_PHASES.ended).toEqual([]);
  });

  it('never returns to a phase once left (no cycle)', () => {
    for (const phase of PHASES) expect(reachable(phase).has(phase), phase).toBe(false);
  });

  it('lets a call end from any live phase, but reach the engine only through dispatching', () => {
    for (const phase of PHASES.filter((p) => p !== 'ended')) expect(isTransition(phase, 'ended'), phase).toBe(true);
    expect(PHASES.filter((p) => isTransition(p, 'awaiting_response'))).toEqual(['dispatching']);
    expect(isTransition('queued', 'streaming')).toBe(false);
    expect(isTransition('ending', 'streaming')).toBe(false);
  });
});

describe('ACTS_IN', () => {
  it('has a row for exactly the events ProxiedCall handles', () => {
    const handlers = Object.getOwnPropertyNames(ProxiedCall.prototype).filter((name) => /^on[A-Z]/.test(name) && name !== 'onStreamFault');
    expect(Object.keys(ACTS_IN).sort()).toEqual([...handlers, 'shutdown'].sort());
  });

  it('lets no event act on an ended call', () => {
    for (const event of Object.keys(ACTS_IN) as (keyof typeof ACTS_IN)[]) expect(actsIn(event, 'ended'), event).toBe(false);
  });

  it('reads the request body and the engine only while the call is in the engine', () => {
    expect(PHASES.filter((p) => actsIn('onClientData', p))).toEqual(['awaiting_response', 'streaming']);
    expect(PHASES.filter((p) => actsIn('onEngineData', p))).toEqual(['streaming']);
    expect(PHASES.filter((p) => actsIn('onAdmitted', p))).toEqual(['queued']);
    expect(PHASES.filter((p) => actsIn('shutdown', p))).toEqual(['queued', 'dispatching', 'awaiting_response', 'streaming']);
  });
});
