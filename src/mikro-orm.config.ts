// Read by the MikroORM CLI (`npm run migration:create`); the service builds its config in db/orm.ts.
import { ormConfig } from './db/orm.ts';

export default ormConfig(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/herald_dev');
