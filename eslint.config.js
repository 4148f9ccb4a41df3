import js from '@eslint/js';
import boundaries from 'eslint-plugin-boundaries';
import tseslint from 'typescript-eslint';

// The floors of src/, top to bottom: cli → service → http | worker → providers → domain → db.
// A floor imports only itself and the floors below it; `shared` (the logger, the metrics and the
// generated types) is below them all. docs/DESIGN.md §Layers says what lives on each.
const floors = ['cli', 'service', 'http', 'worker', 'providers', 'domain', 'db', 'shared'];
const below = (floor) => {
  const rest = floors.slice(floors.indexOf(floor) + 1);
  // http and worker are side by side: neither imports the other.
  return floor === 'http' ? rest.filter((f) => f !== 'worker') : rest;
};

export default tseslint.config(
  { ignores: ['node_modules/', 'src/generated/', 'sdk/src/generated/', 'sdk/dist/', '.herald/', '.venv/', 'reports/', 'build/', 'dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', Buffer: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { boundaries },
    settings: {
      'boundaries/include': ['src/**/*.ts'],
      'boundaries/elements': [
        { type: 'cli', pattern: 'src/cli' },
        { type: 'service', pattern: 'src/service' },
        { type: 'http', pattern: 'src/http' },
        { type: 'worker', pattern: 'src/worker' },
        { type: 'providers', pattern: 'src/providers' },
        { type: 'domain', pattern: 'src/domain' },
        { type: 'db', pattern: 'src/db' },
        { type: 'shared', pattern: ['src/logging', 'src/observability', 'src/generated'] },
      ],
    },
    rules: {
      'boundaries/no-unknown-files': 'error',
      'boundaries/dependencies': [
        'error',
        {
          default: 'disallow',
          policies: [
            ...floors.map((floor) => ({
              from: { element: { type: floor } },
              allow: { to: { element: { types: { anyOf: [floor, ...below(floor)] } } } },
            })),
            { allow: { to: { module: { origin: ['external', 'core'] } } } },
          ],
        },
      ],
    },
  },
);
