// Preloaded through NODE_OPTIONS (`--require`) where `--cpu-prof` is not allowed (the rehearsal's workers run as
// `npm run serve:worker`): profiles the process whose arguments name PROFILE_MATCH (not npm or its shell) and writes a
// .cpuprofile into PROFILE_DIR when it exits, as `--cpu-prof` would.
const match = process.env.PROFILE_MATCH;
if (match && process.argv.some((a) => a.includes(match))) {
  const inspector = require('node:inspector');
  const fs = require('node:fs');
  const path = require('node:path');
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 1000 });
  session.post('Profiler.start');
  process.on('exit', () => {
    // The in-process session answers synchronously, so this completes before the process ends.
    session.post('Profiler.stop', (err, res) => {
      if (err) return;
      fs.mkdirSync(process.env.PROFILE_DIR, { recursive: true });
      fs.writeFileSync(path.join(process.env.PROFILE_DIR, `CPU.${process.pid}.cpuprofile`), JSON.stringify(res.profile));
    });
  });
}
