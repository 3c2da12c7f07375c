/**
 * Test certificates, made with the `openssl` command in a temporary folder (EC P-256, so each
 * costs a few milliseconds):
 *
 *   const pki = createTestPki();          // ca, server (SAN 127.0.0.1, localhost), client, otherCa, otherServer, expiredServer
 *   const next = pki.issue('server-2');   // a new server certificate from the same CA, for rotations
 *   pki.remove();
 *
 * And what a TLS server presents to a new connection (`presentedCertificate`), to tell rotations
 * apart; `httpsGet` for an HTTPS endpoint trusted through the test CA; `secretVolume` for files
 * rotated the way the kubelet rotates a mounted secret.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:https';
import { connect, type PeerCertificate } from 'node:tls';
import { certFiles, type CertFiles, type IssueOptions, type TestPki } from './fixture-pki.js';

export type { TestPki } from './fixture-pki.js';

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function createTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-pki-'));
  const makeCa = (name: string): CertFiles => {
    openssl(['req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '3', '-subj', `/CN=${name}`], dir);
    return certFiles(dir, name);
  };
  const ca = makeCa('test-ca');
  const otherCa = makeCa('other-ca');
  let expiredSetUp = false;

  const issue = (name: string, options: IssueOptions = {}): CertFiles => {
    const signer = options.signer === 'otherCa' ? 'other-ca' : 'test-ca';
    const usage = options.usage === 'client' ? 'clientAuth' : 'serverAuth';
    const ext = join(dir, `${name}.ext`);
    writeFileSync(ext, `basicConstraints=CA:FALSE\nsubjectAltName=${options.san ?? 'IP:127.0.0.1,DNS:localhost'}\nextendedKeyUsage=${usage}\n`);
    openssl(['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], dir);
    if (options.expired) {
      if (!expiredSetUp) {
        mkdirSync(join(dir, 'cadb'));
        writeFileSync(join(dir, 'cadb', 'index.txt'), '');
        writeFileSync(join(dir, 'cadb', 'serial'), '1000\n');
        writeFileSync(
          join(dir, 'ca.cnf'),
          '[ca]\ndefault_ca = test\n[test]\ndatabase = cadb/index.txt\nnew_certs_dir = cadb\nserial = cadb/serial\ndefault_md = sha256\npolicy = any\nunique_subject = no\n[any]\ncommonName = supplied\n',
        );
        expiredSetUp = true;
      }
      const period = ['-startdate', '20200101000000Z', '-enddate', '20200102000000Z'];
      openssl(
        [
          'ca',
          '-batch',
          '-config',
          'ca.cnf',
          '-cert',
          `${signer}.crt`,
          '-keyfile',
          `${signer}.key`,
          '-in',
          `${name}.csr`,
          '-out',
          `${name}.crt`,
          ...period,
          '-extfile',
          ext,
          '-notext',
        ],
        dir,
      );
    } else {
      const serial = `0x${randomBytes(8).toString('hex')}`;
      openssl(
        [
          'x509',
          '-req',
          '-in',
          `${name}.csr`,
          '-CA',
          `${signer}.crt`,
          '-CAkey',
          `${signer}.key`,
          '-set_serial',
          serial,
          '-days',
          '2',
          '-extfile',
          ext,
          '-out',
          `${name}.crt`,
        ],
        dir,
      );
    }
    return certFiles(dir, name);
  };

  return {
    dir,
    ca,
    otherCa,
    server: issue('server'),
    client: issue('client', { usage: 'client' }),
    otherServer: issue('other-server', { signer: 'otherCa' }),
    expiredServer: issue('expired-server', { expired: true }),
    issue,
    write(name, text) {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The certificate a TLS server on 127.0.0.1:`port` presents to a new connection (ALPN h2 offered), verified against `ca`. */
export function presentedCertificate(port: number, ca: Buffer, client?: { cert: Buffer; key: Buffer }): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['h2', 'http/1.1'], ...client }, () => {
      const peer = socket.getPeerCertificate();
      socket.destroy();
      resolve(peer);
    });
    socket.setTimeout(5000, () => socket.destroy(new Error('no TLS handshake within 5 s')));
    socket.once('error', reject);
  });
}

export interface TlsClientOptions {
  readonly ca: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
}

/** GET over HTTPS (HTTP/1.1), trusting `ca`; bounded at 5 s. */
export function httpsGet(url: string, tls: TlsClientOptions): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...tls, agent: false, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

export interface SecretVolume {
  /** `<dir>/tls.crt`, `<dir>/tls.key`, `<dir>/ca.crt`: symlinks through `..data`, as in a mounted Kubernetes secret. */
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
  /** Writes a new version and swaps `..data` to it in one rename, as the kubelet's atomic writer does. */
  mount(files: { cert: Buffer | string; key: Buffer | string; ca?: Buffer | string }): void;
}

/** A folder laid out like a mounted Kubernetes secret (tls.crt, tls.key, ca.crt), holding `initial`. */
export function secretVolume(pki: TestPki, name: string, initial: { cert: Buffer; key: Buffer; ca?: Buffer }): SecretVolume {
  const dir = join(pki.dir, name);
  mkdirSync(dir);
  let version = 0;
  const volume: SecretVolume = {
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    caFile: join(dir, 'ca.crt'),
    mount(files) {
      const versionDir = `..v${++version}`;
      mkdirSync(join(dir, versionDir));
      writeFileSync(join(dir, versionDir, 'tls.crt'), files.cert);
      writeFileSync(join(dir, versionDir, 'tls.key'), files.key);
      writeFileSync(join(dir, versionDir, 'ca.crt'), files.ca ?? pki.ca.cert);
      symlinkSync(versionDir, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    },
  };
  volume.mount(initial);
  for (const file of ['tls.crt', 'tls.key', 'ca.crt']) symlinkSync(join('..data', file), join(dir, file));
  return volume;
}
