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
  // One file a core. A third file at once filled the gaps while tests waited on Postgres, providers
  // and spawned processes, but on a host that is already short of CPU it slowed every file by half
  // and the recovery bounds of the process suites measured that; `make test` fills the gaps with
  // the fuzz, at a lower priority.
  maxWorkers: 2,
  // A worker ends once its event loop is empty. On a busy host jest has reported workers as failing
  // to exit within its default 500 ms while test/support/lingering-handles.ts, which names whatever
  // holds a worker it ends, found the worker already on its way out (some forty test files' modules
  // in its heap). A worker a handle holds is still ended and reported, 5 s later.
  workerGracefulExitTimeout: 5000,
};
