// What the page and its service worker share, in IndexedDB (same origin, so the worker reads what
// the page wrote): the settings the worker needs to report events and to register a changed
// subscription, and the outbox of reports Herald has not yet taken.
import type { EventCreate } from '../generated/index.ts';
import type { OutboxEntry, Registered } from './rules.ts';

/** What subscribe() keeps for the service worker. */
export type StoredSettings = {
  baseUrl: string;
  appToken: string;
  installationId: string;
  userId: string | null;
  /** The VAPID public key subscribed with: a worker re-subscribing after `pushsubscriptionchange` needs it. */
  vapidPublicKey: string;
  /** The last registration sent, so that an unchanged subscription is not sent again on every page load. */
  registered?: Registered;
};

const databaseName = 'herald-web-push';
const settingsStore = 'settings';
const outboxStore = 'outbox';
const settingsKey = 'current';

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

function open(): Promise<IDBDatabase> {
  const request = indexedDB.open(databaseName, 1);
  request.onupgradeneeded = () => {
    request.result.createObjectStore(settingsStore);
    request.result.createObjectStore(outboxStore, { autoIncrement: true });
  };
  return done(request);
}

/** Runs `work` in one transaction and resolves once it has committed. */
async function inTransaction<T>(store: string, mode: IDBTransactionMode, work: (objects: IDBObjectStore) => Promise<T>): Promise<T> {
  const database = await open();
  try {
    const transaction = database.transaction(store, mode);
    const committed = new Promise<void>((resolve, reject) => {
      transaction.oncomplete = () => resolve();
      transaction.onerror = () => reject(transaction.error);
      transaction.onabort = () => reject(transaction.error);
    });
    const result = await work(transaction.objectStore(store));
    await committed;
    return result;
  } finally {
    database.close();
  }
}

export function readSettings(): Promise<StoredSettings | undefined> {
  return inTransaction(settingsStore, 'readonly', (objects) => done(objects.get(settingsKey) as IDBRequest<StoredSettings | undefined>));
}

export function writeSettings(settings: StoredSettings): Promise<void> {
  return inTransaction(settingsStore, 'readwrite', async (objects) => void (await done(objects.put(settings, settingsKey))));
}

export function queueReports(events: readonly EventCreate[], now: number): Promise<void> {
  return inTransaction(outboxStore, 'readwrite', async (objects) => {
    for (const event of events) await done(objects.add({ event, queuedAt: now }));
  });
}

export function readOutbox(): Promise<OutboxEntry[]> {
  return inTransaction(outboxStore, 'readonly', async (objects) => {
    const [keys, values] = await Promise.all([done(objects.getAllKeys()), done(objects.getAll())]);
    return values.map((value: Omit<OutboxEntry, 'key'>, index) => ({ key: keys[index] as number, ...value }));
  });
}

export function removeReports(keys: readonly number[]): Promise<void> {
  if (keys.length === 0) return Promise.resolve();
  return inTransaction(outboxStore, 'readwrite', async (objects) => {
    for (const key of keys) await done(objects.delete(key));
  });
}
