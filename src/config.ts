// The only reader of process.env: validated once, reported all together, frozen.
import path from 'node:path';
import { z } from 'zod';

const flag = z
  .enum(['true', 'false', '1', '0'])
  .transform((value) => value === 'true' || value === '1');

const schema = z.object({
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
  HOST: z.string().min(1).default('0.0.0.0'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  HERALD_DATA_DIR: z.string().min(1).default('.herald'),
  HERALD_EMBEDDED_PG_PORT: z.coerce.number().int().min(1).max(65535).default(5488),
  HERALD_BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb)$/i).default('1mb'),
  HERALD_VALIDATE_RESPONSES: flag.default(false),
  HERALD_DB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
});

export type Config = Readonly<z.infer<typeof schema>> & { readonly dataDir: string };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`Invalid environment:\n${problems.join('\n')}`);
  }
  return Object.freeze({ ...result.data, dataDir: path.resolve(result.data.HERALD_DATA_DIR) });
}
