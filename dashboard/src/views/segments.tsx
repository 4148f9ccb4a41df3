// The application's segments (GET /api/v1/segments), each with its size now (POST
// /api/v1/audiences/count): how many installations and users a send to it would reach. A token
// with segments:write creates, edits (the size counted as the audience changes) and deletes them.
import { useState } from 'preact/hooks';
import type { Segment } from '../api.ts';
import { emptyAudience, fromAudience, toAudience, type AudienceDraft } from '../audience-draft.ts';
import { AudienceEditor, SizeLine, useAudienceSize } from '../audience.tsx';
import { Empty, ErrorNote, FieldError, fieldErrorsOf, ReadOnlyNote } from '../components.tsx';
import { can, useLoad, useSession } from '../context.ts';
import { describeAudience, formatDate, formatNumber } from '../format.ts';

type Editing = { name: string; draft: AudienceDraft; isNew: boolean };

export function SegmentsView() {
  const { app } = useSession();
  const segments = useLoad((herald) => herald.listSegments(), 'segments', 60_000);
  const writable = can(app, 'segments:write');
  const [editing, setEditing] = useState<Editing | null>(null);
  return (
    <section aria-labelledby="segments-heading">
      <div class="section-head">
        <h1 id="segments-heading">Segments</h1>
        <div class="controls">
          {writable && !editing && (
            <button type="button" onClick={() => setEditing({ name: '', draft: emptyAudience, isNew: true })}>
              New segment
            </button>
          )}
        </div>
      </div>
      <ReadOnlyNote missing={writable ? [] : ['segments:write']} doing="that saves and deletes segments" />
      {editing && (
        <SegmentEditor
          key={editing.isNew ? '' : editing.name}
          editing={editing}
          onDone={() => {
            setEditing(null);
            segments.reload();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
      {segments.error && <ErrorNote error={segments.error} ability="notifications:read" />}
      {segments.data?.length === 0 && (
        <Empty title="No segments">
          <p>
            A segment is a saved audience a send can name. {writable ? 'Create one with New segment, or' : 'Save one'} with{' '}
            <code>herald segments set</code> (or <code>PUT /api/v1/segments/&#123;name&#125;</code>).
          </p>
        </Empty>
      )}
      {segments.data && segments.data.length > 0 && (
        <div class="table-scroll">
          <table class="data">
            <thead>
              <tr>
                <th scope="col">Segment</th>
                <th scope="col">Audience</th>
                <th scope="col" class="num">Installations</th>
                <th scope="col" class="num">Users</th>
                <th scope="col">Saved</th>
                {writable && (
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {segments.data.map((segment) => (
                <SegmentRow
                  key={segment.name}
                  segment={segment}
                  writable={writable}
                  onEdit={() => setEditing({ name: segment.name, draft: fromAudience(segment.audience), isNew: false })}
                  onDeleted={segments.reload}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function SegmentRow({ segment, writable, onEdit, onDeleted }: { segment: Segment; writable: boolean; onEdit(): void; onDeleted(): void }) {
  const { run } = useSession();
  const [error, setError] = useState<Error | null>(null);
  // Counted one segment at a time, each when its row is shown: a count reads the application's installations.
  const size = useLoad((herald) => herald.countAudience({ segment: segment.name }), `segment-size-${segment.name}-${segment.updated_at}`, 60_000);
  const figure = (value: number | undefined) => (size.error ? '—' : value === undefined ? '…' : formatNumber(value));
  const remove = async () => {
    if (!window.confirm(`Delete the segment ${segment.name}? Sends already made to it keep their audience.`)) return;
    try {
      await run((herald) => herald.deleteSegment(segment.name));
      onDeleted();
    } catch (failure) {
      setError(failure as Error);
    }
  };
  return (
    <tr>
      <th scope="row">
        <code>{segment.name}</code>
      </th>
      <td>{describeAudience(segment.audience)}</td>
      <td class="num">{figure(size.data?.installations)}</td>
      <td class="num">{figure(size.data?.users)}</td>
      <td class="nowrap">{formatDate(segment.updated_at)}</td>
      {writable && (
        <td class="nowrap">
          <div class="actions">
            <button type="button" class="secondary" onClick={onEdit} aria-label={`Edit ${segment.name}`}>
              Edit
            </button>
            <button type="button" class="secondary" onClick={remove} aria-label={`Delete ${segment.name}`}>
              Delete
            </button>
          </div>
          {error && <ErrorNote error={error} ability="segments:write" />}
        </td>
      )}
    </tr>
  );
}

function SegmentEditor({ editing, onDone, onCancel }: { editing: Editing; onDone(): void; onCancel(): void }) {
  const { run } = useSession();
  const [name, setName] = useState(editing.name);
  const [draft, setDraft] = useState(editing.draft);
  const [state, setState] = useState<{ busy: boolean; error: Error | null }>({ busy: false, error: null });
  const audience = toAudience(draft);
  const size = useAudienceSize(audience ? { audience } : null);
  const errors = fieldErrorsOf(state.error);
  const save = async (event: Event) => {
    event.preventDefault();
    setState({ busy: true, error: null });
    try {
      // An empty audience is sent as it is, for the API's own message beside the field.
      await run((herald) => herald.putSegment(name.trim(), audience ?? {}));
      onDone();
    } catch (error) {
      setState({ busy: false, error: error as Error });
    }
  };
  return (
    <form class="confirm form-grid" aria-label={editing.isNew ? 'New segment' : `Edit segment ${editing.name}`} onSubmit={save}>
      <h2>{editing.isNew ? 'New segment' : `Edit ${editing.name}`}</h2>
      {editing.isNew && (
        <label class="field">
          <span>Name</span>
          <input required pattern="[A-Za-z0-9_.:\-]{1,64}" value={name} placeholder="pro-android" onInput={(event) => setName(event.currentTarget.value)} />
          <FieldError errors={errors} field="name" />
        </label>
      )}
      <AudienceEditor draft={draft} onChange={setDraft} errors={errors} prefix="audience" />
      <SizeLine size={size} empty="Add a condition (or tick every installation) to see how many it reaches." />
      {state.error && !Object.keys(errors).length && <ErrorNote error={state.error} ability="segments:write" />}
      <div class="actions">
        <button type="submit" disabled={state.busy}>
          {state.busy ? 'Saving…' : 'Save segment'}
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
