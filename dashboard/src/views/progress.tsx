// A running send on its notification's page: a progress bar (a broadcast's walk through its
// audience, and the outcome of the pushes of the installations walked so far) and, for a send at
// each device's local time, how many pushes are still due in each hour (a broadcast's from its
// waves, a send to users' from its pending deliveries).
import type { ComponentChildren } from 'preact';
import type { Notification } from '../api.ts';
import { ErrorNote } from '../components.tsx';
import { useLoad, useReloadOn } from '../context.ts';
import { formatHour, formatNumber } from '../format.ts';
import { dueByHour, hasEnded, progressOf, wavesDueByHour, type DueHour } from '../progress.ts';

function Bar({ label, percent, children }: { label: string; percent: number; children: ComponentChildren }) {
  return (
    <div class="stacked" role="progressbar" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={percent}>
      {children}
    </div>
  );
}

const share = (part: number, whole: number) => `${whole > 0 ? (part / whole) * 100 : 0}%`;

export function ProgressSection({ notification }: { notification: Notification }) {
  if (hasEnded(notification) || notification.status === 'queued') return null;
  const { walk, pushes } = progressOf(notification);
  return (
    <section aria-labelledby="progress-heading" class="progress-section">
      <h2 id="progress-heading">Progress</h2>
      {notification.progress && (
        <>
          <h3>Audience walked</h3>
          {walk ? (
            <>
              <Bar label="Audience walked" percent={walk.percent}>
                <span class="seg-walked" style={{ width: `${walk.percent}%` }} />
              </Bar>
              <p class="walk-summary">
                {walk.percent} %: {formatNumber(walk.walked)} of {formatNumber(walk.of)} installations walked, for{' '}
                {formatNumber(notification.target_users)} target users.
              </p>
            </>
          ) : (
            <p class="hint">The walk has started; its audience is counted once its first batch is written.</p>
          )}
        </>
      )}
      <h3>Pushes</h3>
      <Bar label="Pushes made" percent={pushes.percent}>
        <span class="seg-accepted" style={{ width: share(pushes.accepted, pushes.installations) }} />
        <span class="seg-failed" style={{ width: share(pushes.failed, pushes.installations) }} />
        <span class="seg-skipped" style={{ width: share(pushes.skipped, pushes.installations) }} />
      </Bar>
      <ul class="legend push-summary">
        <li style={{ '--swatch': 'var(--ok)' }}>{formatNumber(pushes.accepted)} accepted</li>
        <li style={{ '--swatch': 'var(--bad)' }}>{formatNumber(pushes.failed)} failed</li>
        <li style={{ '--swatch': '#8892a6' }}>{formatNumber(pushes.skipped)} skipped</li>
        <li>{formatNumber(pushes.pending)} still to push</li>
        <li class="hint">
          of {formatNumber(pushes.installations)} installations{notification.audience ? ' walked so far' : ''}
        </li>
      </ul>
      {typeof notification.options.local_time === 'string' && <DueHours notification={notification} />}
    </section>
  );
}

/** Pages of pending deliveries read for the due hours: past them the figures are "at least". */
const duePages = 10;
const duePageSize = 100;

/**
 * Pushes still due per hour: a broadcast's from its waves (what each has still to walk); a send to
 * users from its pending deliveries' `scheduled_for`, re-read as the send's figures move.
 */
function DueHours({ notification }: { notification: Notification }) {
  if (notification.progress) return <DueTable notification={notification} hours={wavesDueByHour(notification.progress.waves)} more={false} />;
  return <PendingDueHours notification={notification} />;
}

function PendingDueHours({ notification }: { notification: Notification }) {
  const pending = useLoad(async (herald) => {
    const deliveries = [];
    let cursor: string | undefined;
    for (let page = 0; page < duePages; page++) {
      const answer = await herald.listDeliveries(notification.id, { state: 'pending', limit: duePageSize, cursor });
      deliveries.push(...answer.data);
      cursor = answer.meta.next_cursor ?? undefined;
      if (!cursor) break;
    }
    return { hours: dueByHour(deliveries), more: cursor !== undefined };
  }, `due-${notification.id}`);
  useReloadOn(JSON.stringify(notification.statistics), pending.reload);
  if (pending.error) return <ErrorNote error={pending.error} ability="notifications:read" />;
  if (!pending.data) return null;
  return <DueTable notification={notification} hours={pending.data.hours} more={pending.data.more} />;
}

function DueTable({ notification, hours, more }: { notification: Notification; hours: DueHour[]; more: boolean }) {
  return (
    <>
      <h3 id="due-heading">Still due, by hour (at {notification.options.local_time as string} in each device's time zone)</h3>
      {hours.length === 0 ? (
        <p class="hint">No push is waiting for its time.</p>
      ) : (
        <div class="table-scroll">
          <table class="data" aria-labelledby="due-heading">
            <thead>
              <tr>
                <th scope="col">Due in the hour from</th>
                <th scope="col" class="num">Pushes</th>
              </tr>
            </thead>
            <tbody>
              {hours.map((row) => (
                <tr key={row.hour ?? 'now'}>
                  <td>{row.hour ? formatHour(row.hour) : 'now (its time has come)'}</td>
                  <td class="num">
                    {more ? 'at least ' : ''}
                    {formatNumber(row.pushes)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
