const path = require('node:path');

// Prints one plain closing line ("tests: N passed, N failed, N skipped") that CI systems can read without
// knowing jest's own summary format. It must be the last line of the run: jest's summary (on stderr) is written
// after the reporters' onRunComplete, so the line is written when the process exits, on both streams (whichever
// one a reader takes, or however it merges them, the line closes the output).
// Before it, the slowest test files, to keep the suite's time in view (README › Tests: well under 15 minutes).
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests: passed, numFailedTests: failed, numPendingTests: skipped, numRuntimeErrorTestSuites: broken } = results;
    const timed = results.testResults
      .map((r) => ({ file: path.relative(process.cwd(), r.testFilePath), seconds: (r.perfStats.end - r.perfStats.start) / 1000 }))
      .filter((r) => r.seconds > 0)
      .sort((a, b) => b.seconds - a.seconds);
    if (timed.length > 1) {
      const total = timed.reduce((sum, r) => sum + r.seconds, 0);
      const rows = timed.slice(0, 12).map((r) => `  ${r.seconds.toFixed(1).padStart(6)} s  ${r.file}`);
      process.stderr.write(`\nslowest test files (of ${timed.length}, ${Math.round(total)} s in all):\n${rows.join('\n')}\n`);
    }
    const line = `\ntests: ${passed} passed, ${failed + broken} failed, ${skipped} skipped\n`;
    process.once('exit', () => {
      process.stderr.write(line);
      process.stdout.write(line);
    });
  }
}
module.exports = SummaryReporter;
