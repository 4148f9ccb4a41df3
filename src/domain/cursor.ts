// Opaque page cursors: the base64url of the last id of the previous page (ids are UUIDv7, so
// id order is creation order).
import { validationFailed } from './errors.ts';
import { isUuid } from './ids.ts';

export function encodeCursor(id: string): string {
  return Buffer.from(id).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString();
  if (!isUuid(id)) throw validationFailed({ cursor: ['The cursor is invalid.'] });
  return id;
}
