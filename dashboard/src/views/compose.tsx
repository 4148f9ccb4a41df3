// "New notification": whom (user ids pasted, an audience built from the application's tags, or a
// saved segment) with the audience's size counted as it changes, what (content, localizations,
// data) and how (options); a test send to one installation; then a confirmation that counts the
// audience again and sends once, however often the button is pressed (one Idempotency-Key per
// composed message). The API's field errors are shown beside their fields.
import { useMemo, useRef, useState } from 'preact/hooks';
import type { NotificationSend } from '../api.ts';
import { splitList } from '../audience-draft.ts';
import { AudienceEditor, SizeLine, useAudienceSize } from '../audience.tsx';
import { buildSend, contentOf, emptyDraft, idempotencyKeys, type MessageDraft, type RecipientKind } from '../compose.ts';
import { ErrorNote, FieldError, fieldErrorsOf, ReadOnlyNote, type FieldErrorsOf } from '../components.tsx';
import { can, useLoad, useSession } from '../context.ts';
import { describeAudience, formatNumber } from '../format.ts';
import { href } from '../route.ts';
import { ContentFields, OptionsFields } from './compose-fields.tsx';

const kinds: { kind: RecipientKind; label: string }[] = [
  { kind: 'audience', label: 'An audience filter' },
  { kind: 'segment', label: 'A saved segment' },
  { kind: 'users', label: 'User ids' },
];

export function ComposeView() {
  const { app } = useSession();
  const [draft, setDraft] = useState(emptyDraft);
  const [errors, setErrors] = useState<FieldErrorsOf>({});
  const [failure, setFailure] = useState<Error | null>(null);
  const [confirming, setConfirming] = useState<NotificationSend | null>(null);
  // Kept for the page's life, not the confirmation's: a send whose answer was lost, confirmed again
  // unchanged, carries the same key and returns the first notification instead of a second.
  const keyFor = useMemo(() => idempotencyKeys(), []);
  const set = (change: Partial<MessageDraft>) => setDraft({ ...draft, ...change });
  const broadcast = draft.kind !== 'users';
  const missing = [
    ...(can(app, 'notifications:send') ? [] : ['notifications:send']),
    ...(broadcast && !can(app, 'notifications:broadcast') ? ['notifications:broadcast'] : []),
  ];
  const review = (event: Event) => {
    event.preventDefault();
    const built = buildSend(draft);
    setErrors(built.problems);
    setFailure(null);
    if (built.recipients && Object.keys(built.problems).length === 0) setConfirming({ ...built.content, recipients: built.recipients });
  };
  const refused = (error: Error) => {
    setConfirming(null);
    setFailure(error);
    setErrors(fieldErrorsOf(error));
  };

  return (
    <section aria-labelledby="compose-heading">
      <h1 id="compose-heading">New notification</h1>
      <ReadOnlyNote missing={missing} doing={broadcast ? 'that sends to an audience or a segment' : 'that sends'} />
      {failure && (
        <p class="notice" role="alert">
          Not sent: {failure.message}
        </p>
      )}
      {confirming ? (
        <Confirm send={confirming} keyFor={keyFor} onBack={() => setConfirming(null)} onRefused={refused} />
      ) : (
        <form class="form-grid" aria-label="Compose" onSubmit={review} noValidate>
          <fieldset class="field">
            <legend>Recipients</legend>
            <div class="choices" role="radiogroup" aria-label="Send to">
              {kinds.map(({ kind, label }) => (
                <label key={kind} class="choice">
                  <input type="radio" name="kind" value={kind} checked={draft.kind === kind} onChange={() => set({ kind })} />
                  {label}
                </label>
              ))}
            </div>
            <FieldError errors={errors} field="recipients" exact />
            <Recipients draft={draft} set={set} errors={errors} />
          </fieldset>
          <ContentFields draft={draft} set={set} errors={errors} />
          <OptionsFields draft={draft} set={set} errors={errors} />
          <div class="actions">
            <button type="submit" disabled={missing.length > 0}>
              Review and send…
            </button>
          </div>
          <TestSend draft={draft} disabled={!can(app, 'notifications:send')} onErrors={setErrors} />
        </form>
      )}
    </section>
  );
}

function Recipients({ draft, set, errors }: { draft: MessageDraft; set(change: Partial<MessageDraft>): void; errors: FieldErrorsOf }) {
  const segments = useLoad((herald) => herald.listSegments(), 'compose-segments');
  const audience = buildSend(draft).recipients;
  const target = audience && 'audience' in audience && audience.audience ? { audience: audience.audience } : draft.kind === 'segment' && draft.segment ? { segment: draft.segment } : null;
  const size = useAudienceSize(draft.kind === 'users' ? null : target);
  if (draft.kind === 'users') {
    const count = splitList(draft.userIds).length;
    return (
      <label class="field">
        <span>User ids</span>
        <textarea
          value={draft.userIds}
          rows={4}
          placeholder="user-1, user-2 (commas, spaces or one a line; at most 500)"
          aria-invalid={Boolean(errors['recipients.user_ids'])}
          onInput={(event) => set({ userIds: event.currentTarget.value })}
        />
        <span class="hint" aria-live="polite">
          {formatNumber(count)} user {count === 1 ? 'id' : 'ids'}: each one's installations receive it.
        </span>
        <FieldError errors={errors} field="recipients.user_ids" />
      </label>
    );
  }
  if (draft.kind === 'segment') {
    return (
      <>
        <label class="field">
          <span>Segment</span>
          <select value={draft.segment} onChange={(event) => set({ segment: event.currentTarget.value })}>
            <option value="">Choose a segment…</option>
            {(segments.data ?? []).map((segment) => (
              <option key={segment.name} value={segment.name}>
                {segment.name}
              </option>
            ))}
          </select>
          <FieldError errors={errors} field="recipients.segment" />
        </label>
        {segments.data?.length === 0 && (
          <p class="hint">
            No segments yet: <a href={href({ view: 'segments' })}>create one</a>, or send to an audience filter.
          </p>
        )}
        <SizeLine size={size} empty="Choose a segment to see how many it reaches." />
      </>
    );
  }
  return (
    <>
      <AudienceEditor draft={draft.audience} onChange={(next) => set({ audience: next })} errors={errors} prefix="recipients.audience" />
      <SizeLine size={size} empty="Add a condition (or tick every installation) to see how many it reaches." />
    </>
  );
}

/** "Send to 812,344 installations?": the audience counted again as the send is confirmed. */
function Confirm({
  send,
  keyFor,
  onBack,
  onRefused,
}: {
  send: NotificationSend;
  keyFor(send: NotificationSend): string;
  onBack(): void;
  onRefused(error: Error): void;
}) {
  const { run } = useSession();
  const sending = useRef(false);
  const [busy, setBusy] = useState(false);
  const { recipients } = send;
  const target = recipients.audience ? { audience: recipients.audience } : recipients.segment ? { segment: recipients.segment } : null;
  const size = useAudienceSize(target, 0);
  const question = recipients.user_ids
    ? `Send to ${formatNumber(recipients.user_ids.length)} ${recipients.user_ids.length === 1 ? 'user' : 'users'}?`
    : size.count
      ? `Send to ${formatNumber(size.count.installations)} installations?`
      : 'Counting the audience…';
  const confirm = async () => {
    // A second click while the first is on its way sends nothing more; were it sent, its key would
    // return the first notification.
    if (sending.current) return;
    sending.current = true;
    setBusy(true);
    try {
      const accepted = await run((herald) => herald.send(send, { idempotencyKey: keyFor(send) }));
      window.location.hash = href({ view: 'notification', id: accepted.data.id });
    } catch (error) {
      sending.current = false;
      setBusy(false);
      onRefused(error as Error);
    }
  };
  return (
    <div class="confirm" role="region" aria-labelledby="confirm-heading">
      <h2 id="confirm-heading">{question}</h2>
      <p>
        To{' '}
        {recipients.audience
          ? describeAudience(recipients.audience)
          : recipients.segment
            ? `the segment ${recipients.segment}`
            : `the installations of ${(recipients.user_ids ?? []).slice(0, 5).join(', ')}${(recipients.user_ids ?? []).length > 5 ? ', …' : ''}`}
        {size.count && `: ${formatNumber(size.count.users)} users, counted just now`}.
      </p>
      {size.error && <ErrorNote error={size.error} />}
      <p>
        “{send.notification.title ?? send.notification.body ?? 'Data only'}”
        {send.options?.send_at ? ` at ${new Date(send.options.send_at).toLocaleString()}` : ' now'}
        {send.options?.local_time ? `, at ${send.options.local_time} in each device's time zone` : ''}
        {send.options?.throttle_per_minute ? `, at most ${formatNumber(send.options.throttle_per_minute)} a minute` : ''}.
      </p>
      <div class="actions">
        <button type="button" disabled={busy || (!recipients.user_ids && !size.count)} onClick={confirm}>
          {busy ? 'Sending…' : 'Send'}
        </button>
        <button type="button" class="secondary" disabled={busy} onClick={onBack}>
          Back
        </button>
      </div>
    </div>
  );
}

/** The message as composed, to one installation (`recipients.installation_ids`): needs only notifications:send. */
function TestSend({ draft, disabled, onErrors }: { draft: MessageDraft; disabled: boolean; onErrors(errors: FieldErrorsOf): void }) {
  const { run } = useSession();
  const keyFor = useMemo(() => idempotencyKeys(), []);
  const [installation, setInstallation] = useState('');
  const [state, setState] = useState<{ busy: boolean; sent: string | null; error: Error | null }>({ busy: false, sent: null, error: null });
  const test = async () => {
    const { content, problems } = contentOf(draft);
    onErrors(problems);
    if (!installation.trim() || Object.keys(problems).length) return;
    const send: NotificationSend = { ...content, recipients: { installation_ids: [installation.trim()] } };
    setState({ busy: true, sent: null, error: null });
    try {
      const accepted = await run((herald) => herald.send(send, { idempotencyKey: keyFor(send) }));
      setState({ busy: false, sent: accepted.data.id, error: null });
    } catch (error) {
      setState({ busy: false, sent: null, error: error as Error });
      onErrors(fieldErrorsOf(error));
    }
  };
  return (
    <fieldset class="field" disabled={disabled}>
      <legend>Send a test to one installation</legend>
      <div class="row">
        <label class="field">
          <span>Installation id</span>
          <input value={installation} placeholder="the id your app registered it under" onInput={(event) => setInstallation(event.currentTarget.value)} />
        </label>
        <button type="button" class="secondary" disabled={state.busy || !installation.trim()} onClick={test}>
          {state.busy ? 'Sending test…' : 'Send test'}
        </button>
      </div>
      <FieldError errors={fieldErrorsOf(state.error)} field="recipients.installation_ids" />
      {state.error && (
        <p class="field-error" role="alert">
          Test not sent: {state.error.message}
        </p>
      )}
      {state.sent && (
        <p role="status">
          Test sent: <a href={href({ view: 'notification', id: state.sent })}>follow it</a>.
        </p>
      )}
    </fieldset>
  );
}
