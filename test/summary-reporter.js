// Prints one plain closing line ("tests: N passed, N failed, N skipped") that CI systems can read without
// knowing jest's own summary format.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests: passed, numFailedTests: failed, numPendingTests: skipped, numRuntimeErrorTestSuites: broken } = results;
    process.stdout.write(`\ntests: ${passed} passed, ${failed + broken} failed, ${skipped} skipped\n`);
  }
}
module.exports = SummaryReporter;
