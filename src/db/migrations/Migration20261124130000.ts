import { Migration } from '@mikro-orm/migrations';

export class Migration20261124130000 extends Migration {

  override name = 'Migration20261124130000';

  override up(): void | Promise<void> {
    // Which worker process runs which job (src/fanout/leases.ts): a job whose process died is
    // handed back within seconds instead of after pg-boss's 10 s heartbeat.
    this.addSql(`create table "job_leases" ("job_id" uuid not null, "queue" text not null, "holder" int not null, "taken_at" timestamptz not null default now(), primary key ("job_id"));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table "job_leases";`);
  }

}
