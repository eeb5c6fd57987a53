// Prints one plain closing line ("tests: N passed, N failed, N skipped") that CI systems can read without
// knowing jest's own summary format. It must be the last line of the run: jest's summary (on stderr) is written
// after the reporters' onRunComplete, so the line is written when the process exits, on both streams (whichever
// one a reader takes, or however it merges them, the line closes the output).
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests: passed, numFailedTests: failed, numPendingTests: skipped, numRuntimeErrorTestSuites: broken } = results;
    const line = `\ntests: ${passed} passed, ${failed + broken} failed, ${skipped} skipped\n`;
    process.once('exit', () => {
      process.stderr.write(line);
      process.stdout.write(line);
    });
  }
}
module.exports = SummaryReporter;
