/**
 * Keeps one TLS endpoint's certificate files fresh without a restart: every `intervalMs` it
 * reads the files, and when their content (sha256) differs from what is in use it checks the
 * new set (pem-files.ts) and hands it to `apply` (a server's setSecureContext, a client's next
 * connection). Polling content rather than watching: Kubernetes rotates a mounted secret by
 * swapping a symlink two levels up, which fs.watch on the file does not report reliably, and
 * reading three small files every few seconds costs nothing.
 *
 *   const reloader = new CertReloader({ label: 'ingress', files, intervalMs: 5000, initial, apply, logger, metrics });
 *   reloader.start();  ...  reloader.stop();
 *
 * A set that does not check out (half written, key and certificate from different rotations,
 * unreadable) is refused: the material in use stays, one warning is logged and one error
 * counted per distinct content, and the next poll reads again, so the rotation completing
 * later is taken then. A set is refused only when a second read finds the same content: each
 * file is read through its own path, so a poll that straddles the kubelet's atomic swap can pair
 * the old certificate with the new key, which is no broken rotation and must not be reported as
 * one. Polls never overlap.
 */
import { readFile as readFileAsync } from 'node:fs/promises';
import type { Logger } from '../log.js';
import {
  contentsHash,
  describeCertificate,
  filesByRole,
  materialFromContents,
  unreadable,
  validityProblem,
  TlsFileError,
  type TlsContents,
  type TlsFileRole,
  type TlsFiles,
  type TlsMaterial,
} from './pem-files.js';
import type { TlsMetrics } from './tls-metrics.js';

export interface ReloadTimers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export type PollOutcome = 'unchanged' | 'ok' | 'error';

export interface CertReloaderOptions {
  /** The endpoint, in logs and metrics: ingress, system, upstream-client, ... */
  readonly label: string;
  readonly files: TlsFiles;
  /** Between the end of one poll and the start of the next; 0: never poll. */
  readonly intervalMs: number;
  /** The material in use now, read from the same files at startup. */
  readonly initial: TlsMaterial;
  /** Puts checked new material in use; a throw counts as a refused reload (the old stays). */
  readonly apply: (material: TlsMaterial) => void;
  readonly logger: Logger;
  readonly metrics?: TlsMetrics | undefined;
  /** Injected for tests. Defaults: fs.promises.readFile, real unref'd timers, Date.now. */
  readonly readFile?: (path: string) => Promise<Buffer>;
  readonly timers?: ReloadTimers;
  readonly now?: () => number;
}

const REAL_TIMERS: ReloadTimers = {
  set: (callback, ms) => setTimeout(callback, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export class CertReloader {
  private material: TlsMaterial;
  private appliedHash: string;
  /** Content already refused (logged and counted once). */
  private refusedHash: string | undefined;
  private generationValue = 0;
  private timer: unknown;
  private running = false;
  private readonly timers: ReloadTimers;
  private readonly readFile: (path: string) => Promise<Buffer>;
  private readonly now: () => number;

  constructor(private readonly options: CertReloaderOptions) {
    this.material = options.initial;
    this.appliedHash = contentsHash(options.initial);
    this.timers = options.timers ?? REAL_TIMERS;
    this.readFile = options.readFile ?? readFileAsync;
    this.now = options.now ?? Date.now;
    options.metrics?.register(options.label);
    options.metrics?.presenting(options.label, options.initial.leaf);
  }

  /** The material in use. */
  get current(): TlsMaterial {
    return this.material;
  }

  /** Counts the reloads taken: a client compares it to know its connections use old material. */
  get generation(): number {
    return this.generationValue;
  }

  start(): void {
    if (this.running || this.options.intervalMs <= 0) return;
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    this.timers.clear(this.timer);
    this.timer = undefined;
  }

  /** Reads the files once and takes them if they changed and check out. */
  async poll(): Promise<PollOutcome> {
    const { files, label, logger, metrics } = this.options;
    let contents: TlsContents;
    try {
      contents = await this.readAll(files);
    } catch (err) {
      if (await this.readsOtherwiseNow(undefined)) return 'unchanged'; // mid-swap: the next poll reads the finished set
      return this.refuse(`unreadable: ${(err as Error).message}`, err as Error);
    }
    const hash = contentsHash(contents);
    if (hash === this.appliedHash) {
      this.refusedHash = undefined;
      return 'unchanged';
    }
    if (hash === this.refusedHash) return 'unchanged';
    let material: TlsMaterial;
    try {
      material = materialFromContents(files, contents);
      this.options.apply(material);
    } catch (err) {
      if (await this.readsOtherwiseNow(hash)) return 'unchanged'; // mid-swap: the next poll reads the finished set
      return this.refuse(hash, err as Error);
    }
    this.material = material;
    this.appliedHash = hash;
    this.refusedHash = undefined;
    this.generationValue++;
    metrics?.reloaded(label, 'ok');
    metrics?.presenting(label, material.leaf);
    logger.info('TLS certificate files reloaded', { listener: label, ...(material.leaf ? describeCertificate(material.leaf) : {}) });
    const problem = material.leaf && validityProblem(material.leaf, this.now());
    if (problem) logger.warn(`TLS reload took a certificate that is not valid now: ${problem}`, { listener: label });
    return 'ok';
  }

  private refuse(key: string, err: Error): PollOutcome {
    if (key === this.refusedHash) return 'unchanged';
    this.refusedHash = key;
    this.options.metrics?.reloaded(this.options.label, 'error');
    this.options.logger.warn('TLS certificate files changed but cannot be used; keeping the certificate in use, retrying on the next change', {
      listener: this.options.label,
      ...(err instanceof TlsFileError ? { file: err.role } : {}),
      reason: err.message,
    });
    return 'error';
  }

  /** Reads the files again: true when they now differ from `hash` (undefined: were unreadable), i.e. the first read was torn. */
  private async readsOtherwiseNow(hash: string | undefined): Promise<boolean> {
    try {
      return contentsHash(await this.readAll(this.options.files)) !== hash;
    } catch {
      return false;
    }
  }

  private async readAll(files: TlsFiles): Promise<TlsContents> {
    const contents: Partial<Record<TlsFileRole, Buffer>> = {};
    for (const [role, path] of filesByRole(files)) {
      try {
        contents[role] = await this.readFile(path);
      } catch (err) {
        throw unreadable(role, path, err);
      }
    }
    return contents;
  }

  private schedule(): void {
    this.timer = this.timers.set(() => {
      void this.poll().finally(() => {
        if (this.running) this.schedule();
      });
    }, this.options.intervalMs);
  }
}
