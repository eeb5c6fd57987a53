/**
 * Three tiers (ENGINEERING.md › Test tiers), all run by `npm test`:
 * - unit: pure code, no services (seconds): `npm run test:unit`;
 * - workflow: workflows on a throw-away Temporal dev server with activity doubles, and replay of recorded histories;
 *   its global setup finds (or fetches once, with Maven) the time-skipping test server some of them need;
 * - stack: the real stack (Postgres, Temporal, SMTP capture, DNS, the API and worker processes), which the stack
 *   tier's global setup starts once; schemathesis runs here too.
 * A fourth, faults (test/faults: fault injection on stacks of their own, several minutes), runs only when selected:
 * `npm run test:faults`; so does a fifth, mta (test/mta: Debian's Postfix as relay and bounce source, installed where
 * missing): `npm run test:mta`; so does a sixth, rehearsal (a selection of the stack tests against the production
 * rehearsal, scripts/rehearsal.ts): `npm run test:rehearsal`. `npm test` selects the three above.
 * A project's global setup runs only when the run selects one of its tests, so the unit tier never boots the stack.
 * @type {import('jest').Config}
 */
const tier = (displayName, roots, extra = {}) => ({
  displayName,
  testEnvironment: 'node',
  roots: roots.map((r) => `<rootDir>/test/${r}`),
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: false, tsconfig: { module: 'commonjs', moduleResolution: 'node', isolatedModules: true } }] },
  setupFiles: ['<rootDir>/test/setup-env.ts'],
  slowTestThreshold: 20,
  ...extra,
});

module.exports = {
  projects: [
    tier('unit', ['unit']),
    tier('workflow', ['workflows'], { globalSetup: '<rootDir>/test/workflow-global-setup.ts' }),
    tier('stack', ['integration', 'fuzz'], { globalSetup: '<rootDir>/test/global-setup.ts', globalTeardown: '<rootDir>/test/global-teardown.ts' }),
    // Fault injection (test/faults): each file starts a stack of its own (test/helpers/own-stack.ts) and breaks it.
    tier('faults', ['faults']),
    // A real MTA in the loop (test/mta): Debian's Postfix as relay and bounce source, Dovecot as the bounce mailbox (installed where missing).
    tier('mta', ['mta']),
    // The production rehearsal (scripts/rehearsal.ts: real Temporal server on Postgres, docker-compose.yml's jobs, two
    // APIs, two workers): the stack tests of sends, campaigns and their schedules, automations, imports and domains.
    // test/rehearsal: faults of the cluster (a worker, an API, Postgres) on the same rehearsal, one file at a time.
    tier('rehearsal', ['integration', 'rehearsal'], {
      testMatch: ['**/test/integration/{send,delivery,campaign-send,campaigns,automations,automation-runs,import,domains}.test.ts', '**/test/rehearsal/*.test.ts'],
      globalSetup: '<rootDir>/test/rehearsal-global-setup.ts',
      globalTeardown: '<rootDir>/test/global-teardown.ts',
    }),
  ],
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
  testTimeout: 60_000,
};
