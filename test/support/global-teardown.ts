import { rmSync } from 'node:fs';

const state = globalThis as { heraldTestDatabase?: { drop(): Promise<void> }; heraldCompileCache?: string };

export default async function globalTeardown(): Promise<void> {
  await state.heraldTestDatabase?.drop();
  if (state.heraldCompileCache) rmSync(state.heraldCompileCache, { recursive: true, force: true });
}
