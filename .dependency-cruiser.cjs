/**
 * The layering of docs/architecture.md, checked on every `npm test`: platform <- protocol <-
 * {sidecar, frontend, tools/engine, tools/load} <- cli, nothing upward, no product importing
 * another or a tool, and no cycle anywhere. Inside each product the same holds between its
 * folders (`within`): the sidecar's admission decides and knows no wire; the frontend's text and
 * routing know nothing of generation, generation nothing of HTTP, and only the composition root
 * (`frontend.ts`, `command.ts`) sees them all.
 */
const layer = (name, mayImport) => ({
  name: `${name.replace('/', '-')}-imports-only-below`,
  comment: `src/${name} may import only ${mayImport.join(', ')} (docs/architecture.md)`,
  severity: 'error',
  from: { path: `^src/${name}/` },
  to: { path: '^src/', pathNot: mayImport.map((allowed) => `^src/${allowed}/`) },
});

/** src/<product>/<folder> may import, inside its product, only the folders or files named. */
const within = (product, folder, mayImport) => ({
  name: `${product}-${folder.replace(/\/$|\.ts$/, '')}-imports-only-below`,
  comment: `src/${product}/${folder} may import, in src/${product}, only ${mayImport.join(', ') || 'itself'} (docs/architecture.md)`,
  severity: 'error',
  from: { path: `^src/${product}/${folder.replaceAll('.', '\\.')}` },
  to: { path: `^src/${product}/`, pathNot: [folder, ...mayImport].map((allowed) => `^src/${product}/${allowed.replaceAll('.', '\\.')}`) },
});

module.exports = {
  forbidden: [
    { name: 'no-cycles', comment: 'import cycles make load order and layering unreadable', severity: 'error', from: {}, to: { circular: true } },
    layer('platform', ['platform']),
    layer('protocol', ['protocol', 'platform']),
    layer('sidecar', ['sidecar', 'protocol', 'platform']),
    layer('frontend', ['frontend', 'protocol', 'platform']),
    layer('tools/engine', ['tools/engine', 'protocol', 'platform']),
    layer('tools/load', ['tools/load', 'protocol', 'platform']),
    // The sidecar: config <- admission <- {metrics, proxy, system} ; proxy <- load ; all <- sidecar.ts.
    within('sidecar', 'config/', []),
    within('sidecar', 'admission/', ['config/']),
    within('sidecar', 'metrics/', ['admission/', 'config/']),
    within('sidecar', 'system/', ['admission/', 'config/']),
    within('sidecar', 'proxy/', ['admission/', 'config/', 'metrics/']),
    within('sidecar', 'load/', ['admission/', 'config/', 'proxy/call-context.ts']),
    {
      name: 'sidecar-admission-knows-no-wire',
      comment: 'admission returns decisions (a pushback in ms); the proxy turns them into HTTP/2 headers',
      severity: 'error',
      from: { path: '^src/sidecar/(admission|config)/' },
      to: { dependencyTypes: ['core'], path: '^(node:)?(http2|http|https|tls)$' },
    },
    // The frontend: text, routing <- generate <- {sources, http} <- frontend.ts, command.ts.
    within('frontend', 'text/', []),
    within('frontend', 'routing/', []),
    within('frontend', 'frontend-metrics.ts', []),
    within('frontend', 'request-class-metrics.ts', []),
    within('frontend', 'generate/', ['routing/', 'text/', 'frontend-metrics.ts']),
    within('frontend', 'sources/', ['routing/', 'generate/worker-credentials.ts']),
    within('frontend', 'http/', ['generate/', 'routing/', 'text/', 'frontend-metrics.ts', 'request-class-metrics.ts']),
    {
      name: 'src-never-imports-tests-or-bench',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'unit-tier-starts-no-process',
      comment: 'test/unit starts no processes and no external binaries; tests that do are integration tests',
      severity: 'error',
      from: { path: '^test/unit/' },
      to: {
        path: ['^(node:)?child_process$', '^test/support/(certs|nats-server|sidecar-process|engine-process|system-processes|promtool)\\.ts$'],
      },
    },
    {
      name: 'only-known-folders',
      comment: 'every source file belongs to a layer',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(platform|protocol|sidecar|frontend|tools/engine|tools/load|cli)/' },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    reporterOptions: { text: { highlightFocused: true } },
  },
};
