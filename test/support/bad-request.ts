/** Runs `run`, expects it to throw the frontend's 400 (FrontendError bad_request), and returns its message. */
import { expect } from 'vitest';
import { FrontendError } from '../../src/frontend/generate/errors.js';

export function badRequest(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(FrontendError);
    expect((error as FrontendError).code).toBe('bad_request');
    return (error as Error).message;
  }
  throw new Error('expected a bad_request FrontendError');
}
