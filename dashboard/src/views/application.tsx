// The token's application: whether pushes can go out (each platform's credentials as the workers
// last found them), its traffic charted, how many sends it may make, and its webhooks.
import type { ProviderStatus } from '../api.ts';
import { Badge, ErrorNote } from '../components.tsx';
import { useLoad, useSession } from '../context.ts';
import { formatDate, formatNumber } from '../format.ts';
import { HourlyCharts, OpenRateChart } from './charts.tsx';
import { WebhooksSection } from './webhooks.tsx';

const platformNames = { ios: 'iOS (APNs)', android: 'Android (FCM)', web: 'Web (Web Push)' } as const;

const advice: Record<ProviderStatus['status'], string> = {
  healthy: 'Pushes go out.',
  unverified: 'Set, but no provider has accepted a push made with them yet: the first accepted push (or herald credentials check) makes them healthy.',
  not_configured: 'No credentials: deliveries to this platform are skipped (no_credentials).',
  unhealthy: 'The provider refused these credentials, or the workers cannot open them: pushes to this platform fail until they are replaced.',
  unreachable: 'The provider could not be reached: pushes wait and are retried.',
};

const setCommand = { ios: 'herald credentials set-apns', android: 'herald credentials set-fcm', web: 'herald credentials set-webpush --subject mailto:…' } as const;

export function ApplicationView() {
  const { app: signedInApp } = useSession();
  // Read again on each visit: credential health changes as the workers push.
  const current = useLoad((herald) => herald.getApp(), 'application', 10_000);
  const app = current.data ?? signedInApp;
  return (
    <section aria-labelledby="application-heading">
      <h1 id="application-heading">{app.name}</h1>
      {current.error && <ErrorNote error={current.error} />}
      <dl class="facts">
        <div>
          <dt>Application id</dt>
          <dd>
            <code>{app.id}</code>
          </dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{formatDate(app.created_at)}</dd>
        </div>
        <div>
          <dt>This token</dt>
          <dd>
            “{app.token.name}”: {app.token.abilities.join(', ')}
          </dd>
        </div>
      </dl>
      <section aria-labelledby="charts-heading">
        <h2 id="charts-heading">Traffic</h2>
        <div class="charts">
          <HourlyCharts />
          <OpenRateChart />
        </div>
      </section>
      <h2>Send quota</h2>
      {app.send_policy ? (
        <p class="quota">
          <strong>{formatNumber(app.send_policy.quota)}</strong> sends per <strong>{formatNumber(app.send_policy.window_seconds)} s</strong>{' '}
          <span class="detail">(a send past it is answered 429 with Retry-After; change it with <code>herald apps limit</code>)</span>
        </p>
      ) : (
        <p class="detail">Shown to a token with notifications:send.</p>
      )}
      <h2>Credentials</h2>
      {app.credentials ? <CredentialsTable app={app} credentials={app.credentials} /> : <p class="detail">Shown to a token with notifications:send or notifications:read.</p>}
      <WebhooksSection />
    </section>
  );
}

function CredentialsTable({ app, credentials }: { app: { id: string }; credentials: Record<'ios' | 'android' | 'web', ProviderStatus> }) {
  return (
    <div class="table-scroll">
    <table class="data">
      <thead>
        <tr>
          <th scope="col">Platform</th>
          <th scope="col">Health</th>
          <th scope="col">Since</th>
          <th scope="col">Reason</th>
          <th scope="col">Set</th>
          <th scope="col">What it means</th>
        </tr>
      </thead>
      <tbody>
        {(['ios', 'android', 'web'] as const).map((platform) => {
          const status = credentials[platform];
          return (
            <tr key={platform}>
              <th scope="row">{platformNames[platform]}</th>
              <td>
                <Badge value={status.status} />
              </td>
              <td class="nowrap">{formatDate(status.since)}</td>
              <td>{status.reason ?? ''}</td>
              <td class="nowrap">{formatDate(status.updated_at)}</td>
              <td>
                {advice[status.status]}
                {status.status === 'unverified' && platform !== 'web' ? (
                  <>
                    {' '}
                    Ask the provider now with <code>herald credentials check --app {app.id}</code>.
                  </>
                ) : null}
                {status.status === 'not_configured' || status.status === 'unhealthy' ? (
                  <>
                    {' '}
                    Set them with <code>{setCommand[platform]} --app {app.id}</code>.
                  </>
                ) : null}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
    </div>
  );
}
