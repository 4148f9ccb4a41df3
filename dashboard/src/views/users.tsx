// A user's devices and what reached them: the first questions of "why didn't user X get it" and
// "did yesterday's push reach user X". The deliveries are the user's of every notification
// (GET /api/v1/deliveries?user_id=), newest first, a page at a time.
import { useState } from 'preact/hooks';
import type { Installation } from '../api.ts';
import { Badge, Empty, ErrorNote, firstPage, nextPage, Pager, previousPage } from '../components.tsx';
import { useLoad, useSession } from '../context.ts';
import { ago, formatDate, formatNumber } from '../format.ts';
import { href } from '../route.ts';

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
          <UserDeliveries userId={userId} />
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

const deliveriesPageSize = 25;

/** The user's deliveries of every notification, newest first, a page at a time. */
function UserDeliveries({ userId }: { userId: string }) {
  const [pages, setPages] = useState(firstPage);
  const cursor = pages.cursors[pages.page];
  const list = useLoad((herald) => herald.listUserDeliveries({ userId, limit: deliveriesPageSize, cursor }), `${userId}|${cursor ?? ''}`);
  const rows = list.data?.data ?? [];
  const from = pages.page * deliveriesPageSize + 1;
  return (
    <section aria-labelledby="user-deliveries-heading">
      <h2 id="user-deliveries-heading">Deliveries to {userId}</h2>
      <p class="hint">Every notification's, newest first: one per installation the user had when it was sent.</p>
      {list.error && <ErrorNote error={list.error} ability="notifications:read" />}
      {list.loading && !list.data && <p class="loading">Loading…</p>}
      {list.data && rows.length === 0 && pages.page === 0 && (
        <Empty title="No notification reached a device of this user.">
          <p>
            Either no notification targeted this user, or the user had no installation when it was sent. Deliveries go with their
            notification when retention removes it.
          </p>
        </Empty>
      )}
      {list.data && (rows.length > 0 || pages.page > 0) && (
        <>
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
                {rows.map(({ notification_id: notificationId, notification_title: title, delivery }) => (
                  <tr key={delivery.id}>
                    <td>
                      <a href={href({ view: 'notification', id: notificationId })}>{title || 'Notification without a title'}</a>
                    </td>
                    <td class="nowrap">{formatDate(delivery.created_at)}</td>
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
          <Pager
            label="Delivery pages"
            page={pages.page}
            hasNext={list.data.meta.next_cursor !== null}
            onPrevious={() => setPages(previousPage(pages))}
            onNext={() => list.data?.meta.next_cursor && setPages(nextPage(pages, list.data.meta.next_cursor))}
            summary={rows.length === 0 ? 'No more deliveries' : `Deliveries ${formatNumber(from)}–${formatNumber(from + rows.length - 1)}`}
          />
        </>
      )}
    </section>
  );
}
