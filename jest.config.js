/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: { isolatedModules: true, rewriteRelativeImportExtensions: false } }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testSequencer: '<rootDir>/test/support/sequencer.js',
  setupFilesAfterEnv: ['<rootDir>/test/support/lingering-handles.ts'],
  testTimeout: 30000,
  // Tests wait on Postgres, providers and spawned processes more than they use the CPU: three
  // files at once keep both cores busier than two did.
  maxWorkers: 3,
};
