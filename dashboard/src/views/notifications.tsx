// The application's notifications, newest first, filtered by status, a page at a time.
import { useState } from 'preact/hooks';
import type { Notification, NotificationStatus } from '../api.ts';
import { Badge, Empty, ErrorNote, firstPage, nextPage, Pager, previousPage } from '../components.tsx';
import { useLoad } from '../context.ts';
import { formatDate, formatNumber } from '../format.ts';
import { href } from '../route.ts';

const statuses: NotificationStatus[] = ['queued', 'processing', 'completed', 'partial', 'failed', 'cancelled'];
const pageSize = 25;

export const titleOf = (notification: Notification): string =>
  notification.notification.title || notification.notification.body || 'Data-only notification';

export function NotificationsView() {
  const [status, setStatus] = useState<NotificationStatus | ''>('');
  const [pages, setPages] = useState(firstPage);
  const cursor = pages.cursors[pages.page];
  const list = useLoad(
    (herald) => herald.listNotifications({ status: status || undefined, cursor, limit: pageSize }),
    `${status}|${cursor ?? ''}`,
  );

  return (
    <section aria-labelledby="notifications-heading">
      <div class="section-head">
        <h1 id="notifications-heading">Notifications</h1>
        <div class="controls">
          <label for="status-filter">Status</label>
          <select
            id="status-filter"
            value={status}
            onChange={(event) => {
              setStatus(event.currentTarget.value as NotificationStatus | '');
              setPages(firstPage);
            }}
          >
            <option value="">All</option>
            {statuses.map((value) => (
              <option key={value} value={value}>
                {value}
              </option>
            ))}
          </select>
          <button type="button" class="secondary" onClick={list.reload}>
            Refresh
          </button>
        </div>
      </div>
      {list.error && <ErrorNote error={list.error} ability="notifications:read" />}
      {list.data && list.data.data.length === 0 && pages.page === 0 && (
        <Empty title={status ? `No ${status} notifications.` : 'No notifications yet.'}>
          {status ? (
            <p>Choose another status, or “All”.</p>
          ) : (
            <p>
              Send one from your backend with <code>POST /api/v1/notifications</code> and a token that can send (see the{' '}
              <a href="docs">API reference</a>); it appears here at once, and its funnel fills as devices report back.
            </p>
          )}
        </Empty>
      )}
      {list.data && list.data.data.length > 0 && (
        <>
          <div class="table-scroll">
            <table class="data">
              <caption class="visually-hidden">Notifications, newest first</caption>
              <thead>
                <tr>
                  {/* What it is and where it stands first: on a phone the columns after them are scrolled to. */}
                  <th scope="col">Notification</th>
                  <th scope="col">Status</th>
                  <th scope="col">Scheduled for</th>
                  <th scope="col" class="num">Target users</th>
                  <th scope="col">Created</th>
                  <th scope="col" class="num">Users</th>
                  <th scope="col" class="num">Installations</th>
                  <th scope="col" class="num">Accepted</th>
                  <th scope="col" class="num">Received</th>
                  <th scope="col" class="num">Opened</th>
                  <th scope="col" class="num">Failed</th>
                  <th scope="col" class="num">Skipped</th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((n) => (
                  <tr key={n.id}>
                    <td class="title-cell">
                      <a href={href({ view: 'notification', id: n.id })}>{titleOf(n)}</a>
                    </td>
                    <td>
                      <Badge value={n.status} />
                    </td>
                    <td class="nowrap">{formatDate(n.scheduled_for)}</td>
                    <td class="num">{formatNumber(n.target_users)}</td>
                    <td class="nowrap">{formatDate(n.created_at)}</td>
                    <td class="num">{formatNumber(n.statistics.users)}</td>
                    <td class="num">{formatNumber(n.statistics.installations)}</td>
                    <td class="num">{formatNumber(n.statistics.accepted)}</td>
                    <td class="num">{formatNumber(n.statistics.received)}</td>
                    <td class="num">{formatNumber(n.statistics.opened)}</td>
                    <td class="num">{formatNumber(n.statistics.failed)}</td>
                    <td class="num">{formatNumber(n.statistics.skipped)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            label="Notification pages"
            page={pages.page}
            hasNext={list.data.meta.next_cursor !== null}
            onPrevious={() => setPages(previousPage(pages))}
            onNext={() => list.data?.meta.next_cursor && setPages(nextPage(pages, list.data.meta.next_cursor))}
            summary={`Page ${pages.page + 1}`}
          />
        </>
      )}
      {list.loading && !list.data && <p class="loading">Loading…</p>}
    </section>
  );
}
