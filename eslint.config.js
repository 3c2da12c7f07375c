// Lint, type-aware: the rules that catch what the compiler does not (a promise nobody awaits, a
// promise where a callback is expected, a focused or skipped test left behind).
import js from '@eslint/js';
import vitest from '@vitest/eslint-plugin';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { project: ['./test/tsconfig.json'], tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A `let` read by a closure before its one assignment (a handle a callback may cancel) must stay a `let`: as a const it would be in its TDZ.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // TypeScript's convention (noUnusedParameters): a leading underscore marks a deliberately unused name; rest siblings omit properties.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      // Control characters are matched on purpose here (config values that must not contain them, ANSI escapes in CLI output).
      'no-control-regex': 'off',
    },
  },
  {
    files: ['test/**/*.ts'],
    plugins: { vitest },
    rules: {
      'vitest/no-focused-tests': 'error',
      'vitest/no-disabled-tests': 'error',
      // vitest types its asymmetric matchers (expect.any(String), ...) as any: each toEqual({ x: expect.any(String) }) is an "unsafe assignment", and casts would make tests worse; the other no-unsafe-* rules stay on.
      '@typescript-eslint/no-unsafe-assignment': 'off',
    },
  },
  { files: ['eslint.config.js', '.dependency-cruiser.cjs'], ...tseslint.configs.disableTypeChecked },
  // The status pages' browser scripts (static/status/): plain scripts, no type information.
  {
    files: ['static/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: Object.fromEntries(
        ['window', 'document', 'EventSource', 'fetch', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'encodeURIComponent'].map((g) => [
          g,
          'readonly',
        ]),
      ),
    },
  },
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
);
