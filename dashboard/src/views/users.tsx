// A user's devices and what recently reached them: the first questions of "why didn't user X get
// it". The API lists deliveries per notification, so the recent deliveries are those of the
// latest notifications, read one notification at a time, within a stated bound.
import { useState } from 'preact/hooks';
import type { Delivery, Herald, Installation, Notification } from '../api.ts';
import { Badge, Empty, ErrorNote } from '../components.tsx';
import { useLoad, useSession } from '../context.ts';
import { ago, formatDate } from '../format.ts';
import { href } from '../route.ts';
import { titleOf } from './notifications.tsx';

/** How many of the latest notifications are searched for the user's deliveries. */
export const recentNotifications = 25;
const concurrentReads = 4;

export function UsersView({ userId }: { userId: string | null }) {
  // Mounted anew for each user id in the URL (the shell keys it), so the box starts with it.
  const [input, setInput] = useState(userId ?? '');
  return (
    <section aria-labelledby="users-heading">
      <h1 id="users-heading">Users</h1>
      <form
        class="lookup"
        role="search"
        onSubmit={(event) => {
          event.preventDefault();
          const value = input.trim();
          if (value) window.location.hash = href({ view: 'users', userId: value });
        }}
      >
        <label for="user-id">User id</label>
        <input id="user-id" type="search" required value={input} placeholder="user-4821" onInput={(event) => setInput(event.currentTarget.value)} />
        <button type="submit">Look up</button>
      </form>
      {userId ? (
        <>
          <Installations userId={userId} />
          <RecentDeliveries userId={userId} />
        </>
      ) : (
        <p class="hint">
          Enter one of your own user ids (the <code>user_id</code> your app registers installations with, and your backend sends to).
        </p>
      )}
    </section>
  );
}

function Installations({ userId }: { userId: string }) {
  const { run } = useSession();
  const [extra, setExtra] = useState<{ items: Installation[]; cursor: string | null } | null>(null);
  const first = useLoad((herald) => herald.listInstallations({ userId, limit: 50 }), userId);
  if (first.error) return <ErrorNote error={first.error} ability="installations:list" />;
  if (!first.data) return <p class="loading">Loading…</p>;
  const items = [...first.data.data, ...(extra?.items ?? [])];
  const cursor = extra ? extra.cursor : first.data.meta.next_cursor;
  const more = async () => {
    if (!cursor) return;
    const page = await run((herald) => herald.listInstallations({ userId, limit: 50, cursor }));
    setExtra({ items: [...(extra?.items ?? []), ...page.data], cursor: page.meta.next_cursor });
  };
  return (
    <section aria-labelledby="installations-heading">
      <h2 id="installations-heading">Installations of {userId}</h2>
      {items.length === 0 ? (
        <Empty title={`No installation is registered for ${userId}.`}>
          <p>
            A notification to this user reaches no device. The app registers one with <code>PUT /api/v1/installations/&#123;id&#125;</code>{' '}
            and <code>"user_id": "{userId}"</code>; check the id's spelling, and that the app sends it after sign-in.
          </p>
        </Empty>
      ) : (
        <div class="table-scroll">
          <table class="data">
            <thead>
              <tr>
                <th scope="col">Installation</th>
                <th scope="col">Platform</th>
                <th scope="col">Status</th>
                <th scope="col">Permission</th>
                <th scope="col">Last seen</th>
                <th scope="col">Registered</th>
                <th scope="col">Device</th>
              </tr>
            </thead>
            <tbody>
              {items.map((i) => (
                <tr key={i.id}>
                  <td>
                    <code>{i.installation_id}</code>
                  </td>
                  <td>{i.platform}</td>
                  <td>
                    <Badge value={i.status} />
                    {i.invalid_reason && <span class="detail"> {i.invalid_reason}</span>}
                  </td>
                  <td>
                    <Badge value={i.permission} />
                  </td>
                  <td class="nowrap">
                    {formatDate(i.last_seen_at)} <span class="detail">{ago(i.last_seen_at)}</span>
                  </td>
                  <td class="nowrap">{formatDate(i.registered_at)}</td>
                  <td>
                    {[i.device.model, i.device.os_version && `OS ${i.device.os_version}`, i.device.app_version && `app ${i.device.app_version}`, i.device.locale]
                      .filter(Boolean)
                      .join(' · ') || '—'}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {cursor && (
        <button type="button" class="secondary" onClick={more}>
          Load more installations
        </button>
      )}
    </section>
  );
}

type Found = { notification: Notification; delivery: Delivery };

/** The user's deliveries among the latest notifications, newest notification first. */
async function recentDeliveries(herald: Herald, userId: string): Promise<Found[]> {
  const { data: notifications } = await herald.listNotifications({ limit: recentNotifications });
  const found: Found[][] = new Array(notifications.length);
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < notifications.length; index = next++) {
      const notification = notifications[index];
      const { data } = await herald.listDeliveries(notification.id, { userId, limit: 100 });
      found[index] = data.map((delivery) => ({ notification, delivery }));
    }
  };
  await Promise.all(Array.from({ length: concurrentReads }, worker));
  return found.flat();
}

function RecentDeliveries({ userId }: { userId: string }) {
  const recent = useLoad((herald) => recentDeliveries(herald, userId), userId);
  return (
    <section aria-labelledby="recent-heading">
      <h2 id="recent-heading">Recent deliveries to {userId}</h2>
      <p class="hint">Searched: the {recentNotifications} most recent notifications of this application (the API lists deliveries per notification).</p>
      {recent.error && <ErrorNote error={recent.error} ability="notifications:read" />}
      {recent.loading && !recent.data && <p class="loading">Loading…</p>}
      {recent.data && recent.data.length === 0 && (
        <Empty title="None of them went to this user.">
          <p>Either no recent notification targeted this user, or the user had no installation when it was sent.</p>
        </Empty>
      )}
      {recent.data && recent.data.length > 0 && (
        <div class="table-scroll">
          <table class="data">
            <thead>
              <tr>
                <th scope="col">Notification</th>
                <th scope="col">Sent</th>
                <th scope="col">Installation</th>
                <th scope="col">Platform</th>
                <th scope="col">State</th>
                <th scope="col">Reason</th>
                <th scope="col">Received</th>
                <th scope="col">Opened</th>
              </tr>
            </thead>
            <tbody>
              {recent.data.map(({ notification, delivery }) => (
                <tr key={delivery.id}>
                  <td>
                    <a href={href({ view: 'notification', id: notification.id })}>{titleOf(notification)}</a>
                  </td>
                  <td class="nowrap">{formatDate(notification.created_at)}</td>
                  <td>
                    <code>{delivery.installation_id}</code>
                  </td>
                  <td>{delivery.platform}</td>
                  <td>
                    <Badge value={delivery.state} />
                  </td>
                  <td>{delivery.reason ?? ''}</td>
                  <td class="nowrap">{formatDate(delivery.received_at)}</td>
                  <td class="nowrap">{formatDate(delivery.opened_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
