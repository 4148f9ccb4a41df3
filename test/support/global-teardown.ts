const state = globalThis as { heraldTestDatabase?: { drop(): Promise<void> } };

export default async function globalTeardown(): Promise<void> {
  await state.heraldTestDatabase?.drop();
}
