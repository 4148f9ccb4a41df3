// Opaque page cursors: the base64url of the 16 bytes of the last id of the previous page (ids are
// UUIDv7, so id order is creation order). Any 22-character base64url string names a position, so
// every cursor the document's pattern admits is a valid one: pages are "after this position".
const cursorPattern = /^[A-Za-z0-9_-]{22}$/;

export function encodeCursor(id: string): string {
  return Buffer.from(id.replaceAll('-', ''), 'hex').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  // The document's pattern refuses any other cursor with a 422 before a handler runs.
  if (!cursorPattern.test(cursor)) throw new Error(`Not a cursor: ${JSON.stringify(cursor)}`);
  const hex = Buffer.from(cursor, 'base64url').toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * A page from the rows read for it: read `limit + 1`, so that the extra one says whether a next
 * page exists without a count; its cursor is the last answered row's id.
 */
export function toPage<T extends { id: string }>(rows: T[], limit: number): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  return { items, nextCursor: rows.length > limit ? encodeCursor(items[items.length - 1].id) : null };
}
