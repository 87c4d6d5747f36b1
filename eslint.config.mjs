// Lint as the Temporal samples do: no floating promises anywhere, and workflow code kept
// deterministic (no Node built-ins, no runtime imports of the service or activities).
import tseslint from 'typescript-eslint';

const nodeBuiltins = ['assert', 'buffer', 'child_process', 'crypto', 'dns', 'events', 'fs', 'http', 'https', 'net', 'os', 'path', 'process', 'stream', 'timers', 'tls', 'url', 'util', 'worker_threads', 'zlib'];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**', '.data/**', 'test/generated/**', 'eslint.config.mjs'] },
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // The one build step that runs before tsc (scripts/openapi-types.cjs) is plain CommonJS, outside tsconfig.json.
    files: ['scripts/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', parserOptions: { projectService: false } },
    rules: { '@typescript-eslint/no-require-imports': 'off', '@typescript-eslint/no-floating-promises': 'off' },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.flatMap((name) => [name, `node:${name}`]).map((name) => ({ name, message: 'Workflows must be deterministic: no Node built-ins.' })),
          patterns: [
            {
              regex: '^\\.\\./activities(/|$)',
              allowTypeImports: true,
              message: 'Workflows import activity types only.',
            },
            {
              // The exceptions are workflow-safe modules (no Node APIs): search attributes, flow
              // definitions, each domain's flow modules (ids, messages, types) and domain errors.
              regex: '^\\.\\./src/(?!temporal/(search-attributes|flow)$|[a-z-]+/flows/[a-z-]+$|shared/errors$)',
              allowTypeImports: true,
              message: 'Workflows may import only types from src/, and the workflow-safe modules listed in eslint.config.mjs.',
            },
          ],
        },
      ],
    },
  },
);
