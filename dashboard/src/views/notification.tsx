// One notification: while it runs, its progress (read again with back-off, no more once it has
// ended); its funnel; its deliveries filtered and paged (with the localization each received), read
// again as its figures move; and the content as it was sent, its localizations included.
import { useState } from 'preact/hooks';
import { HeraldError, type Delivery, type DeliveryBreakdown, type DeliveryState, type Notification, type Platform } from '../api.ts';
import { Badge, Empty, ErrorNote, firstPage, Json, nextPage, Pager, previousPage } from '../components.tsx';
import { useFollow, useLoad, useReloadOn, useSession } from '../context.ts';
import { describeAudience, formatDate, formatNumber, formatTime } from '../format.ts';
import { href } from '../route.ts';
import { fanoutNote, Funnel } from './funnel.tsx';
import { titleOf } from './notifications.tsx';
import { hasEnded, nextReadMs } from '../progress.ts';
import { ProgressSection } from './progress.tsx';

const pageSize = 50;
type BreakdownRow = DeliveryBreakdown['data'][number];
const states: DeliveryState[] = ['pending', 'accepted', 'failed', 'skipped'];
const platforms: Platform[] = ['ios', 'android', 'web'];

export function NotificationView({ id }: { id: string }) {
  const detail = useFollow(
    async (herald) => {
      const [notification, breakdown] = await Promise.all([herald.getNotification(id), herald.getNotificationBreakdown(id)]);
      return { notification, breakdown };
    },
    id,
    (data, changed, lastMs) => nextReadMs(hasEnded(data.notification), changed, lastMs),
  );

  if (detail.error instanceof HeraldError && detail.error.status === 404) {
    return (
      <Empty title="No such notification in this application.">
        <p>
          It may belong to another application, or retention removed it. <a href={href({ view: 'notifications' })}>Back to the list</a>.
        </p>
      </Empty>
    );
  }
  if (!detail.data) {
    return detail.error ? <ErrorNote error={detail.error} ability="notifications:read" /> : <p class="loading">Loading…</p>;
  }
  const { notification, breakdown } = detail.data;
  return (
    <article aria-labelledby="notification-heading">
      <p class="crumbs">
        <a href={href({ view: 'notifications' })}>← Notifications</a>
      </p>
      <div class="section-head">
        <h1 id="notification-heading">{titleOf(notification)}</h1>
        <Badge value={notification.status} />
        {(notification.status === 'queued' || notification.status === 'processing') && <CancelButton id={notification.id} done={detail.reload} />}
        <div class="controls">
          {/* Once it has ended it is not read again by itself: the events the apps report later come with Refresh. */}
          <button type="button" class="secondary" onClick={detail.reload}>
            Refresh
          </button>
        </div>
      </div>
      <dl class="facts">
        <div>
          <dt>Id</dt>
          <dd>
            <code>{notification.id}</code>
          </dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{formatDate(notification.created_at)}</dd>
        </div>
        {notification.scheduled_for && (
          <div>
            <dt>Scheduled for</dt>
            <dd>{formatDate(notification.scheduled_for)}</dd>
          </div>
        )}
        <div>
          <dt>Fanout started</dt>
          <dd>{formatDate(notification.processing_started_at)}</dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>{formatDate(notification.completed_at)}</dd>
        </div>
        <div>
          <dt>Target users</dt>
          <dd>{notification.audience && notification.status === 'queued' ? 'counted when the fanout starts' : formatNumber(notification.target_users)}</dd>
        </div>
        <div>
          <dt>Audience</dt>
          <dd>
            {notification.audience
              ? `${notification.segment ? `segment ${notification.segment}: ` : ''}${describeAudience(notification.audience)}`
              : 'the user ids it was sent to'}
          </dd>
        </div>
      </dl>
      {detail.error && <ErrorNote error={detail.error} />}
      {detail.nextMs !== undefined && (
        <p class="hint follow-note">
          {detail.nextMs === null
            ? 'It has ended: not read again by itself (Refresh reads the events reported since).'
            : `Read again in ${Math.round(detail.nextMs / 1000)} s (sooner while it moves, less often while it waits).`}
        </p>
      )}
      <ProgressSection notification={notification} />
      <Funnel notification={notification} breakdown={breakdown} />
      <Deliveries
        notificationId={notification.id}
        breakdown={breakdown}
        installations={notification.statistics.installations}
        version={JSON.stringify([notification.status, notification.statistics])}
        whyNone={whyNoDeliveries(notification)}
      />
      <Content notification={notification} />
    </article>
  );
}

/** Cancels after a confirmation; a refusal (no notifications:send, already ended) is said beside the button. */
function CancelButton({ id, done }: { id: string; done: () => void }) {
  const { run } = useSession();
  const [state, setState] = useState<{ busy: boolean; error: Error | null }>({ busy: false, error: null });
  const cancel = async () => {
    if (!window.confirm('Cancel this notification? Pushes not yet made will not be made.')) return;
    setState({ busy: true, error: null });
    try {
      await run((herald) => herald.cancelNotification(id));
      setState({ busy: false, error: null });
    } catch (error) {
      setState({ busy: false, error: error as Error });
    }
    done();
  };
  return (
    <>
      <button type="button" class="secondary" disabled={state.busy} onClick={cancel}>
        Cancel notification
      </button>
      {state.error && <ErrorNote error={state.error} ability="notifications:send" />}
    </>
  );
}

type Filters = { state: DeliveryState | ''; platform: Platform | ''; reason: string; userId: string };
const noFilters: Filters = { state: '', platform: '', reason: '', userId: '' };
const unfiltered = (filters: Filters) => !filters.state && !filters.platform && !filters.reason && !filters.userId;

/** How many deliveries the filters select, from the breakdown; unknown with a user filter. */
function matching(breakdown: BreakdownRow[], filters: Filters, installations: number): number | null {
  if (filters.userId) return null;
  if (unfiltered(filters)) return installations;
  return breakdown
    .filter((row) => (!filters.state || row.state === filters.state) && (!filters.platform || row.platform === filters.platform))
    .filter((row) => !filters.reason || row.reason === filters.reason)
    .reduce((sum, row) => sum + row.deliveries, 0);
}

/** Why an unfiltered deliveries table is empty: the fanout writes one delivery per installation of the target users. */
function whyNoDeliveries(notification: Notification): string {
  if (notification.status === 'cancelled' || (notification.status === 'queued' && notification.scheduled_for)) return fanoutNote(notification) ?? '';
  return 'The fanout writes one delivery per installation of the target users; none of them has an installation, or the fanout has not run yet.';
}

function Deliveries({
  notificationId,
  breakdown,
  installations,
  version,
  whyNone,
}: {
  notificationId: string;
  breakdown: BreakdownRow[];
  installations: number;
  /** The notification's status and figures: the page is read again when they move. */
  version: string;
  whyNone: string;
}) {
  const [filters, setFilters] = useState(noFilters);
  const [userInput, setUserInput] = useState('');
  const [pages, setPages] = useState(firstPage);
  const cursor = pages.cursors[pages.page];
  const query = {
    limit: pageSize,
    cursor,
    state: filters.state || undefined,
    platform: filters.platform || undefined,
    reason: filters.reason || undefined,
    userId: filters.userId || undefined,
  };
  const list = useLoad((herald) => herald.listDeliveries(notificationId, query), JSON.stringify([notificationId, query]));
  useReloadOn(version, list.reload);
  const reasons = [...new Set(breakdown.flatMap((row) => (row.reason ? [row.reason] : [])))].sort();
  const filter = (change: Partial<Filters>) => {
    setFilters({ ...filters, ...change });
    setPages(firstPage);
  };
  const total = matching(breakdown, filters, installations);
  const shown = list.data?.data.length ?? 0;
  const from = pages.page * pageSize + 1;
  const summary =
    shown === 0 ? 'No deliveries' : `Deliveries ${formatNumber(from)}–${formatNumber(from + shown - 1)}${total === null ? '' : ` of ${formatNumber(total)}`}`;

  return (
    <section aria-labelledby="deliveries-heading">
      <h2 id="deliveries-heading">Deliveries</h2>
      <form
        class="filters"
        aria-label="Filter deliveries"
        onSubmit={(event) => {
          event.preventDefault();
          filter({ userId: userInput.trim() });
        }}
      >
        <label>
          State
          <select value={filters.state} onChange={(event) => filter({ state: event.currentTarget.value as Filters['state'] })}>
            <option value="">Any</option>
            {states.map((state) => (
              <option key={state} value={state}>
                {state}
              </option>
            ))}
          </select>
        </label>
        <label>
          Platform
          <select value={filters.platform} onChange={(event) => filter({ platform: event.currentTarget.value as Filters['platform'] })}>
            <option value="">Any</option>
            {platforms.map((platform) => (
              <option key={platform} value={platform}>
                {platform}
              </option>
            ))}
          </select>
        </label>
        <label>
          Reason
          <select value={filters.reason} onChange={(event) => filter({ reason: event.currentTarget.value })}>
            <option value="">Any</option>
            {reasons.map((reason) => (
              <option key={reason} value={reason}>
                {reason}
              </option>
            ))}
          </select>
        </label>
        <label>
          User id
          <input type="search" value={userInput} placeholder="Any user" onInput={(event) => setUserInput(event.currentTarget.value)} />
        </label>
        <button type="submit" class="secondary">
          Apply
        </button>
      </form>
      {list.error && <ErrorNote error={list.error} />}
      {list.data && shown === 0 && pages.page === 0 && (
        <Empty title={unfiltered(filters) ? 'No deliveries yet.' : 'No delivery matches these filters.'}>
          <p>
            {unfiltered(filters) ? whyNone : 'Clear a filter to see more.'}
          </p>
        </Empty>
      )}
      {list.data && shown > 0 && (
        <>
          <div class="table-scroll">
            <table class="data" aria-describedby="deliveries-summary">
              <thead>
                <tr>
                  <th scope="col">Installation</th>
                  <th scope="col">User</th>
                  <th scope="col">Platform</th>
                  <th scope="col">Locale</th>
                  <th scope="col">State</th>
                  <th scope="col">Reason</th>
                  <th scope="col" class="num">Attempts</th>
                  <th scope="col">Last attempt</th>
                  <th scope="col">Received</th>
                  <th scope="col">Displayed</th>
                  <th scope="col">Opened</th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((d) => (
                  <tr key={d.id}>
                    <td>
                      <code>{d.installation_id}</code>
                    </td>
                    <td class="nowrap">{d.user_id ? <a href={href({ view: 'users', userId: d.user_id })}>{d.user_id}</a> : '—'}</td>
                    <td>{d.platform}</td>
                    <td class="nowrap">{localeOf(d)}</td>
                    <td>
                      <Badge value={d.state} />
                    </td>
                    <td>{d.reason ?? ''}</td>
                    <td class="num">{d.attempts}</td>
                    <Time iso={d.last_attempt_at} />
                    <Time iso={d.received_at} />
                    <Time iso={d.displayed_at} />
                    <Time iso={d.opened_at} />
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <p id="deliveries-summary" class="visually-hidden">
            {summary}
          </p>
          <Pager
            label="Delivery pages"
            page={pages.page}
            hasNext={list.data.meta.next_cursor !== null}
            onPrevious={() => setPages(previousPage(pages))}
            onNext={() => list.data?.meta.next_cursor && setPages(nextPage(pages, list.data.meta.next_cursor))}
            summary={summary}
          />
        </>
      )}
    </section>
  );
}

/** The localization a delivery received: its tag, the default content, or nothing for a skipped one (nothing was sent). */
function localeOf(delivery: Delivery) {
  if (delivery.locale) return <code>{delivery.locale}</code>;
  return delivery.state === 'skipped' ? '—' : <span class="hint">default</span>;
}

function Time({ iso }: { iso: string | null }) {
  return (
    <td class="nowrap" title={iso ? formatDate(iso) : undefined}>
      {iso ? <time dateTime={iso}>{formatTime(iso)}</time> : '—'}
    </td>
  );
}

function Content({ notification }: { notification: Notification }) {
  const { title, body, image_url: imageUrl, action_url: actionUrl, localizations } = notification.notification;
  const localized = Object.entries(localizations).sort(([a], [b]) => a.localeCompare(b));
  return (
    <section aria-labelledby="content-heading">
      <h2 id="content-heading">Content as sent</h2>
      <dl class="content">
        <dt>Title</dt>
        <dd>{title ?? <em>none</em>}</dd>
        <dt>Body</dt>
        <dd class="pre">{body ?? <em>none</em>}</dd>
        {/* Shown, never loaded: the dashboard makes no request outside this server. */}
        <dt>Image URL</dt>
        <dd>{imageUrl ? <code>{imageUrl}</code> : <em>none</em>}</dd>
        <dt>Action URL</dt>
        <dd>{actionUrl ? <code>{actionUrl}</code> : <em>none</em>}</dd>
        {localized.length === 0 && (
          <>
            <dt>Localizations</dt>
            <dd>
              <em>none</em>
            </dd>
          </>
        )}
      </dl>
      {localized.length > 0 && (
        <div class="table-scroll">
          <h3 id="localizations-heading">Localizations</h3>
          <table class="data" aria-labelledby="localizations-heading">
            <thead>
              <tr>
                <th scope="col">Locale</th>
                <th scope="col">Title</th>
                <th scope="col">Body</th>
              </tr>
            </thead>
            <tbody>
              {localized.map(([tag, localization]) => (
                <tr key={tag}>
                  <th scope="row">
                    <code>{tag}</code>
                  </th>
                  {/* A field the localization leaves out is the default's: said, not repeated. */}
                  <td>{localization?.title || <span class="hint">default title</span>}</td>
                  <td class="pre">{localization?.body || <span class="hint">default body</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="two">
        <div>
          <h3>Data</h3>
          <Json value={notification.data} />
        </div>
        <div>
          <h3>Options</h3>
          <Json value={notification.options} />
        </div>
      </div>
    </section>
  );
}
