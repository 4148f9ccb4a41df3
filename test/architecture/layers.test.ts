// The floors of src/ (eslint.config.js): an import that runs upward, or across from http to the
// worker, fails `make lint`. Checked here against the real config, so a config that stops
// enforcing them fails the suite.
import { ESLint } from 'eslint';

const eslint = new ESLint({ cwd: process.cwd() });

async function boundaryErrors(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result.messages.filter((m) => m.ruleId === 'boundaries/dependencies').map((m) => m.message);
}

describe('layers', () => {
  it.each([
    ['src/db/upward.ts', "import { Notification } from '../domain/notifications.ts';"],
    ['src/db/sql/upward.ts', "import { jobPriority } from '../../domain/fanout.ts';"],
    ['src/domain/upward.ts', "import { fanoutQueue } from '../worker/queue.ts';"],
    ['src/domain/upward.ts', "import type { PushProvider } from '../providers/provider.ts';"],
    ['src/providers/upward.ts', "import { startWorkers } from '../worker/workers.ts';"],
    ['src/http/across.ts', "import { startWorkers } from '../worker/workers.ts';"],
    ['src/worker/across.ts', "import { createApp } from '../http/app.ts';"],
    ['src/logging/upward.ts', "import { Notification } from '../db/entities.ts';"],
    ['src/observability/upward.ts', "import { queues } from '../worker/queue.ts';"],
    ['src/service/upward.ts', "import { buildProgram } from '../cli/program.ts';"],
  ])('%s may not %s', async (filePath, code) => {
    expect(await boundaryErrors(filePath, `${code}\nexport {};\n`)).toHaveLength(1);
  });

  it.each([
    ['src/cli/down.ts', "import { startService } from '../service/service.ts';"],
    ['src/service/down.ts', "import { createApp } from '../http/app.ts';"],
    ['src/worker/down.ts', "import { apnsPayload } from '../domain/payloads.ts';"],
    ['src/providers/down.ts', "import { entities } from '../db/entities.ts';"],
    ['src/domain/down.ts', "import { entities } from '../db/entities.ts';"],
    ['src/db/down.ts', "import type { Logger } from '../logging/logger.ts';"],
    ['src/db/sql/down.ts', "import { arrayLiteral } from '../array-literal.ts';"],
    ['src/http/down.ts', "import { httpRequest } from '../observability/metrics.ts';"],
  ])('%s may %s', async (filePath, code) => {
    expect(await boundaryErrors(filePath, `${code}\nexport {};\n`)).toEqual([]);
  });
});
