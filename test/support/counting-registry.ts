import { Gauge, Registry } from 'prom-client';

/** A registry whose one gauge counts how often it was collected, i.e. how often it was rendered. */
export function countingRegistry(): { registry: Registry; collects: () => number; set: (v: number) => void } {
  const registry = new Registry();
  let collects = 0;
  let value = 0;
  new Gauge({
    name: 'test_value',
    help: 'test',
    registers: [registry],
    collect() {
      collects++;
      this.set(value);
    },
  });
  return { registry, collects: () => collects, set: (v) => (value = v) };
}
