// The application's segments (GET /api/v1/segments), each with its size now (POST
// /api/v1/audiences/count): how many installations and users a send to it would reach. Segments are
// saved with the API or `herald segments set`.
import type { Segment } from '../api.ts';
import { Empty, ErrorNote } from '../components.tsx';
import { useLoad } from '../context.ts';
import { describeAudience, formatDate, formatNumber } from '../format.ts';

export function SegmentsSection() {
  const segments = useLoad((herald) => herald.listSegments(), 'segments', 60_000);
  return (
    <section aria-labelledby="segments-heading">
      <h2 id="segments-heading">Segments</h2>
      {segments.error && <ErrorNote error={segments.error} ability="notifications:read" />}
      {segments.data?.length === 0 && (
        <Empty title="No segments">
          <p>
            Save one with <code>herald segments set</code> (or <code>PUT /api/v1/segments/&#123;name&#125;</code>) to send to it by name.
          </p>
        </Empty>
      )}
      {segments.data && segments.data.length > 0 && (
        <table class="data">
          <thead>
            <tr>
              <th scope="col">Segment</th>
              <th scope="col">Audience</th>
              <th scope="col" class="num">Installations</th>
              <th scope="col" class="num">Users</th>
              <th scope="col">Saved</th>
            </tr>
          </thead>
          <tbody>
            {segments.data.map((segment) => (
              <SegmentRow key={segment.name} segment={segment} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function SegmentRow({ segment }: { segment: Segment }) {
  // Counted one segment at a time, each when its row is shown: a count reads the application's installations.
  const size = useLoad((herald) => herald.countAudience({ segment: segment.name }), `segment-size-${segment.name}-${segment.updated_at}`, 60_000);
  const figure = (value: number | undefined) => (size.error ? '—' : value === undefined ? '…' : formatNumber(value));
  return (
    <tr>
      <th scope="row">
        <code>{segment.name}</code>
      </th>
      <td>{describeAudience(segment.audience)}</td>
      <td class="num">{figure(size.data?.installations)}</td>
      <td class="num">{figure(size.data?.users)}</td>
      <td>{formatDate(segment.updated_at)}</td>
    </tr>
  );
}
