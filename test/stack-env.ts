/** What the global setup tells the test files (through the environment, which jest workers inherit). */
export interface TestStackEnv {
  apiUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  mailboxUrl: string;
  dataDir: string;
}

export function stackEnv(): TestStackEnv {
  const raw = process.env.MAILWRIGHT_TEST_STACK;
  if (!raw) throw new Error('MAILWRIGHT_TEST_STACK is not set: run the tests with `npm test` (jest global setup starts the stack)');
  return JSON.parse(raw) as TestStackEnv;
}
