import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

/**
 * The Java time-skipping test server from Maven Central. The SDK's own download of its test server needs the
 * internet; Maven's repository is what this project's machines reach, so the workflow tier fetches this one instead.
 */
const TEST_SERVER_VERSION = '1.31.0';

const POM = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>mailwright</groupId>
  <artifactId>temporal-test-server-deps</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.temporal</groupId>
      <artifactId>temporal-test-server</artifactId>
      <version>${TEST_SERVER_VERSION}</version>
    </dependency>
  </dependencies>
</project>
`;

/** Takes the port as its only argument, as the SDK's time-skipping server does; finds lib/ next to itself. */
const WRAPPER = `#!/bin/sh
dir=$(cd "$(dirname "$0")" && pwd)
exec java -cp "$dir/lib/*" io.temporal.testserver.TestServer "$@"
`;

function testServerCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'mailwright', 'temporal-test-server', TEST_SERVER_VERSION);
}

function onPath(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  const found = r.stdout.trim();
  return r.status === 0 && found ? found : undefined;
}

/** How to get the time-skipping tests to run, for the message of a run that skips them. */
export const TEMPORAL_TEST_SERVER_HELP =
  `install java and mvn (the workflow tier then fetches io.temporal:temporal-test-server:${TEST_SERVER_VERSION} once), ` +
  'or set TEMPORAL_TEST_SERVER_PATH to a time-skipping Temporal test server (an executable that takes the port)';

/**
 * Finds an executable that starts a time-skipping Temporal test server on the port it is given:
 * $TEMPORAL_TEST_SERVER_PATH, then the cached wrapper, then fetches the Java test server with Maven into the cache
 * (once; it is built in a temporary folder and renamed into place, so concurrent runs do not see half of it) when
 * java and mvn are installed. Returns undefined when none works.
 */
export function resolveTemporalTestServer(log: (msg: string) => void = console.log): string | undefined {
  const explicit = process.env.TEMPORAL_TEST_SERVER_PATH;
  if (explicit) {
    if (!fs.existsSync(explicit)) throw new Error(`TEMPORAL_TEST_SERVER_PATH=${explicit} does not exist`);
    return explicit;
  }
  const dir = testServerCacheDir();
  const wrapper = path.join(dir, 'run.sh');
  if (fs.existsSync(wrapper)) return wrapper;
  const mvn = onPath('mvn');
  if (!onPath('java') || !mvn) return undefined;

  log(`Fetching the Temporal test server ${TEST_SERVER_VERSION} with Maven into ${dir} (once)...`);
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = fs.mkdtempSync(`${dir}.tmp-`);
  try {
    fs.writeFileSync(path.join(tmp, 'pom.xml'), POM);
    const r = spawnSync(mvn, ['-q', '-B', 'dependency:copy-dependencies', '-DincludeScope=runtime', '-DoutputDirectory=lib'], {
      cwd: tmp,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 15 * 60_000,
    });
    if (r.status !== 0) {
      const output = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n');
      log(`mvn could not fetch the Temporal test server (${r.error?.message ?? `exit code ${r.status}`}):\n${output}`);
      return undefined;
    }
    fs.writeFileSync(path.join(tmp, 'run.sh'), WRAPPER, { mode: 0o755 });
    fs.chmodSync(path.join(tmp, 'run.sh'), 0o755);
    // A folder without the wrapper is no copy of ours (each is renamed into place whole): replace it.
    if (fs.existsSync(dir) && !fs.existsSync(wrapper)) fs.rmSync(dir, { recursive: true, force: true });
    try {
      fs.renameSync(tmp, dir);
    } catch (err) {
      // Another run renamed its copy into place first: use that one.
      if (!fs.existsSync(wrapper)) throw err;
    }
    return wrapper;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
