/**
 * A secret from the environment (a NATS token or password): held in a private field, so it never
 * shows when a config is logged, serialised or inspected; only `reveal()` gives it, at the one
 * place that hands it to a client library.
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '***';
  }

  toJSON(): string {
    return '***';
  }
}
