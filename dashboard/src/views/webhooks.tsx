// The application's webhook endpoints (GET /api/v1/webhooks): each one's state, its last attempt,
// and its recent deliveries from its delivery log. Endpoints are managed with `herald webhooks`.
import type { WebhookEndpoint } from '../api.ts';
import { Badge, Empty, ErrorNote } from '../components.tsx';
import { useLoad } from '../context.ts';
import { formatDate } from '../format.ts';

/** Recent deliveries shown per endpoint: the log's first page, newest event first. */
const recentDeliveries = 5;

export function WebhooksSection() {
  const endpoints = useLoad((herald) => herald.listWebhooks(), 'webhooks', 10_000);
  return (
    <section aria-labelledby="webhooks-heading">
      <h2 id="webhooks-heading">Webhooks</h2>
      {endpoints.error && <ErrorNote error={endpoints.error} ability="notifications:read" />}
      {endpoints.data?.length === 0 && (
        <Empty title="No webhook endpoints">
          <p>
            Add one with <code>herald webhooks add</code> to be told when notifications complete, deliveries fail and installations are invalidated.
          </p>
        </Empty>
      )}
      {endpoints.data?.map((endpoint) => <Endpoint key={endpoint.id} endpoint={endpoint} />)}
    </section>
  );
}

function lastAttempt(endpoint: WebhookEndpoint): string {
  const last = endpoint.last_attempt;
  if (!last) return 'No attempt yet';
  const answer = last.status_code === null ? (last.error ?? 'no answer') : `HTTP ${last.status_code}`;
  return `${last.outcome} (${answer}), ${last.event_type}, ${formatDate(last.at)}`;
}

function Endpoint({ endpoint }: { endpoint: WebhookEndpoint }) {
  const deliveries = useLoad((herald) => herald.listWebhookDeliveries(endpoint.id, { limit: recentDeliveries }), `webhook-${endpoint.id}`, 10_000);
  return (
    <article class="webhook" aria-label={`Webhook endpoint ${endpoint.url}`}>
      <h3>
        <code>{endpoint.url}</code> <Badge value={endpoint.status} />
      </h3>
      <dl class="facts">
        <div>
          <dt>Events</dt>
          <dd>{endpoint.events.join(', ')}</dd>
        </div>
        <div>
          <dt>Last delivery</dt>
          <dd>{lastAttempt(endpoint)}</dd>
        </div>
        {endpoint.status === 'disabled' && (
          <div>
            <dt>Disabled</dt>
            <dd>
              {formatDate(endpoint.disabled_at)}: {endpoint.disabled_reason} (turn it back on with <code>herald webhooks enable {endpoint.id}</code>)
            </dd>
          </div>
        )}
        {endpoint.failing_since && (
          <div>
            <dt>Failing since</dt>
            <dd>{formatDate(endpoint.failing_since)}</dd>
          </div>
        )}
      </dl>
      {deliveries.error && <ErrorNote error={deliveries.error} ability="notifications:read" />}
      {deliveries.data?.data.length === 0 && <p class="detail">No deliveries yet.</p>}
      {deliveries.data && deliveries.data.data.length > 0 && (
        <div class="table-scroll">
        <table class="data">
          <caption>Recent deliveries</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">State</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last answer</th>
              <th scope="col">Made</th>
              <th scope="col">Next attempt</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.data.data.map((delivery) => (
              <tr key={delivery.id}>
                <td>{delivery.event_type}</td>
                <td>
                  <Badge value={delivery.state} /> {delivery.reason ?? ''}
                </td>
                <td>{delivery.attempts}</td>
                <td>{delivery.status_code === null ? (delivery.error ?? '—') : `HTTP ${delivery.status_code}`}</td>
                <td class="nowrap">{formatDate(delivery.created_at)}</td>
                <td class="nowrap">{formatDate(delivery.next_attempt_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
    </article>
  );
}
