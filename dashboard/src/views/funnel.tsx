// The funnel of one notification: users → installations → accepted → received → displayed →
// opened, then what did not get through, failed and skipped split by reason (from the breakdown).
// A table, so that a screen reader reads stages and counts; the bars are decoration.
import type { DeliveryBreakdown, Notification } from '../api.ts';
import { formatDate, formatNumber, percent } from '../format.ts';

type BreakdownRow = DeliveryBreakdown['data'][number];
type Stage = { label: string; count: number; kind: 'flow' | 'failed' | 'skipped' | 'pending'; detail?: string; sub?: boolean };

/** Each reason of one state, with its platforms: `Unregistered` 3 (ios 2, android 1). */
function reasonsOf(breakdown: BreakdownRow[], state: 'failed' | 'skipped'): Stage[] {
  const byReason = new Map<string, Map<string, number>>();
  for (const row of breakdown) {
    if (row.state !== state) continue;
    const reason = row.reason ?? 'no reason given';
    const platforms = byReason.get(reason) ?? new Map<string, number>();
    platforms.set(row.platform, (platforms.get(row.platform) ?? 0) + row.deliveries);
    byReason.set(reason, platforms);
  }
  return [...byReason.entries()]
    .map(([reason, platforms]) => ({
      label: reason,
      count: [...platforms.values()].reduce((a, b) => a + b, 0),
      kind: state,
      sub: true,
      detail: [...platforms.entries()].map(([platform, n]) => `${platform} ${formatNumber(n)}`).join(', '),
    }))
    .sort((a, b) => b.count - a.count || a.label.localeCompare(b.label));
}

export function stagesOf(notification: Notification, breakdown: BreakdownRow[]): Stage[] {
  const s = notification.statistics;
  const pending = Math.max(0, s.installations - s.accepted - s.failed - s.skipped);
  return [
    { label: 'Users', count: s.users, kind: 'flow', detail: `of ${formatNumber(notification.target_users)} targeted` },
    { label: 'Installations', count: s.installations, kind: 'flow' },
    { label: 'Accepted', count: s.accepted, kind: 'flow', detail: 'by APNs, FCM or Web Push' },
    { label: 'Received', count: s.received, kind: 'flow' },
    { label: 'Displayed', count: s.displayed, kind: 'flow' },
    { label: 'Opened', count: s.opened, kind: 'flow' },
    ...(pending > 0 ? [{ label: 'Pending', count: pending, kind: 'pending' as const, detail: 'waiting for the provider' }] : []),
    { label: 'Failed', count: s.failed, kind: 'failed' },
    ...reasonsOf(breakdown, 'failed'),
    { label: 'Skipped', count: s.skipped, kind: 'skipped' },
    ...reasonsOf(breakdown, 'skipped'),
  ];
}

/**
 * What the funnel cannot say by itself: that a send was cancelled (and when), that a scheduled one
 * waits for its time, or that none of its target users had an installation. Null when the counts say it all.
 */
export function fanoutNote(notification: Notification): string | null {
  const { installations } = notification.statistics;
  const users = formatNumber(notification.target_users);
  if (notification.status === 'cancelled') {
    const when = `Cancelled on ${formatDate(notification.completed_at)}`;
    if (installations > 0) return `${when}: the pushes not made by then were skipped (reason cancelled).`;
    if (notification.scheduled_for) return `${when}, before it was due on ${formatDate(notification.scheduled_for)}: nothing was pushed.`;
    return `${when}, before its fanout: nothing was pushed.`;
  }
  if (notification.status === 'queued' && notification.scheduled_for) {
    return `Scheduled: due on ${formatDate(notification.scheduled_for)}, when its fanout to the ${users} target users starts.`;
  }
  if (installations === 0 && notification.completed_at) return `None of the ${users} target users has an installation: nothing was pushed.`;
  return null;
}

export function Funnel({ notification, breakdown }: { notification: Notification; breakdown: BreakdownRow[] }) {
  const stages = stagesOf(notification, breakdown);
  const { installations } = notification.statistics;
  const scale = Math.max(1, ...stages.map((stage) => stage.count));
  const note = fanoutNote(notification);
  return (
    <section aria-labelledby="funnel-heading" class="funnel-section">
      <h2 id="funnel-heading">Funnel</h2>
      {note && (
        <p class="hint fanout-note">
          {note}
          {notification.status !== 'cancelled' && notification.status !== 'queued' && (
            <>
              {' '}
              Apps register devices with <code>PUT /api/v1/installations/&#123;id&#125;</code> and a <code>user_id</code>.
            </>
          )}
        </p>
      )}
      <table class="funnel" aria-describedby="funnel-note">
        <thead>
          <tr>
            <th scope="col">Stage</th>
            <th scope="col" class="num">Count</th>
            <th scope="col" class="num">Of installations</th>
            <th scope="col">
              <span class="visually-hidden">Bar</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {stages.map((stage) => (
            <tr key={`${stage.kind}:${stage.sub ? 'reason:' : ''}${stage.label}`} class={`stage stage-${stage.kind}${stage.sub ? ' stage-reason' : ''}`}>
              <th scope="row">
                {stage.label}
                {stage.detail && <span class="detail"> {stage.detail}</span>}
              </th>
              <td class="num">{formatNumber(stage.count)}</td>
              <td class="num">{stage.label === 'Users' ? '' : percent(stage.count, installations)}</td>
              <td class="bar-cell" aria-hidden="true">
                <div class="bar" style={{ width: `${(stage.count / scale) * 100}%` }} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p id="funnel-note" class="hint">
        Received, displayed and opened count the deliveries the app reported (<code>POST /api/v1/events</code>). Read again while the
        send runs; once it has ended, Refresh reads the events reported since.
      </p>
    </section>
  );
}
