/**
 * The layering of docs/architecture.md, checked on every `npm test`: platform <- protocol <-
 * {sidecar, frontend, tools/engine, tools/load} <- cli, nothing upward, no product importing
 * another or a tool, and no cycle anywhere.
 */
const layer = (name, mayImport) => ({
  name: `${name.replace('/', '-')}-imports-only-below`,
  comment: `src/${name} may import only ${mayImport.join(', ')} (docs/architecture.md)`,
  severity: 'error',
  from: { path: `^src/${name}/` },
  to: { path: '^src/', pathNot: mayImport.map((allowed) => `^src/${allowed}/`) },
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
    {
      name: 'sidecar-config-is-a-leaf',
      comment: "the sidecar's config is read by its parts and imports none of them (no config <-> load two-way)",
      severity: 'error',
      from: { path: '^src/sidecar/config/' },
      to: { path: '^src/sidecar/', pathNot: '^src/sidecar/config/' },
    },
    {
      name: 'src-never-imports-tests-or-bench',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
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
