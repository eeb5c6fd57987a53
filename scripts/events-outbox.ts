// Operator command for the event outbox: `npm run events:outbox -- <command>` with DATABASE_URL set (or the dev
// database from `npm start`).
//   status                                 every consumer: pending, retrying, parked, oldest event not yet accepted
//   parked [consumer]                      parked events with their last error and how many later events each holds back
//   replay <consumer> (--all | <eventId>...)   retry parked events now, with a fresh retry budget
//   discard <consumer> (--all | <eventId>...)  drop parked events undelivered (their contacts' later events go ahead)
//   retire <consumer>                      forget a consumer no worker runs any more, with its queue
import { Pool } from 'pg';
import { consumerStatus, discardParked, listParked, replayParked, retireConsumer } from '../domain/events/outbox-admin';

const USAGE = 'usage: npm run events:outbox -- status | parked [consumer] | replay <consumer> (--all | <eventId>...) | discard <consumer> (--all | <eventId>...) | retire <consumer>';

function selection(args: string[]): string[] | undefined {
  if (args.includes('--all')) return undefined;
  if (args.length === 0) throw new Error(`name the events (ids) or pass --all\n${USAGE}`);
  return args;
}

async function main() {
  const [command, consumer, ...rest] = process.argv.slice(2);
  const pool = new Pool({ connectionString: process.env.DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5433/mailwright', max: 1 });
  try {
    switch (command) {
      case 'status':
        console.table(await consumerStatus(pool));
        break;
      case 'parked':
        for (const p of await listParked(pool, { consumer, limit: 1000 })) console.log(JSON.stringify(p));
        break;
      case 'replay':
        if (!consumer) throw new Error(USAGE);
        console.log(`replayed ${await replayParked(pool, consumer, selection(rest))} parked event(s) of ${consumer}`);
        break;
      case 'discard':
        if (!consumer) throw new Error(USAGE);
        console.log(`discarded ${await discardParked(pool, consumer, selection(rest))} parked event(s) of ${consumer}`);
        break;
      case 'retire':
        if (!consumer) throw new Error(USAGE);
        console.log((await retireConsumer(pool, consumer)) ? `retired ${consumer}` : `no consumer ${consumer}`);
        break;
      default:
        throw new Error(USAGE);
    }
  } finally {
    await pool.end();
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
