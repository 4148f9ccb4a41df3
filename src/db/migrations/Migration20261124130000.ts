import { Migration } from '@mikro-orm/migrations';

export class Migration20261124130000 extends Migration {

  override name = 'Migration20261124130000';

  override up(): void | Promise<void> {
    // Which worker process runs which job (src/worker/leases.ts): a job whose process died is
    // handed back within seconds instead of after pg-boss's 10 s heartbeat.
    // `queue_schema`: deployments (and test runs) with their own pg-boss schema share the table and
    // hand back only their own jobs.
    this.addSql(`create table "job_leases" ("job_id" uuid not null, "queue_schema" text not null, "queue" text not null, "holder" int not null, "taken_at" timestamptz not null default now(), primary key ("job_id"));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table "job_leases";`);
  }

}
