// Read by the MikroORM CLI (`npm run migration:create`, found through package.json "mikro-orm");
// the service builds its config with ormConfig too (orm.ts).
import { ormConfig } from './orm.ts';

export default ormConfig(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/herald_dev');
