const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids we issue are UUIDs; anything else cannot name a row, and must not reach a uuid column. */
export function isUuid(value: string): boolean {
  return uuidPattern.test(value);
}
