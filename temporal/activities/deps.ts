import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';

/** What activities need from the outside world; the worker builds it once, tests may build their own. */
export interface ActivityDeps {
  orm: MikroORM;
  transport: Transporter;
}
