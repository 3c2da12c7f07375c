// FrontendError: a name, a stable code, the overload details and the cause; ClientGoneError is one with its own code.
import { describe, expect, it } from 'vitest';
import { ClientGoneError, FrontendError } from '../../../../src/frontend/generate/errors.js';
import { OVERLOAD_DETAILS } from '../../../support/frontend-fakes.js';

describe('FrontendError', () => {
  it('carries its name, code and message, and is an Error', () => {
    const error = new FrontendError('worker_timeout', 'deadline passed');
    expect(error).toBeInstanceOf(Error);
    expect([error.name, error.code, error.message]).toEqual(['FrontendError', 'worker_timeout', 'deadline passed']);
    expect(String(error)).toBe('FrontendError: deadline passed');
  });

  it('keeps the cause it is given, and has none when given none', () => {
    const underneath = new TypeError('socket closed');
    expect(new FrontendError('internal', 'x', { cause: underneath }).cause).toBe(underneath);
    expect('cause' in new FrontendError('internal', 'x')).toBe(false);
  });

  it('carries the overload details only when given', () => {
    expect(new FrontendError('overloaded', 'busy', { details: OVERLOAD_DETAILS }).details).toBe(OVERLOAD_DETAILS);
    expect(new FrontendError('overloaded', 'busy').details).toBeUndefined();
  });
});

describe('ClientGoneError', () => {
  it('is a FrontendError with the client_gone code and its own name', () => {
    const gone = new ClientGoneError();
    expect(gone).toBeInstanceOf(FrontendError);
    expect([gone.name, gone.code, gone.message]).toEqual(['ClientGoneError', 'client_gone', 'client disconnected']);
  });
});
