// Used by the MikroORM CLI (`npm run migration:create`) only; the service builds its options in orm.ts.
import { ormOptions } from './orm';

export default ormOptions(process.env.DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5433/mailwright', 20, { snapshot: true });
