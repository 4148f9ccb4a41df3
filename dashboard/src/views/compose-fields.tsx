// The compose form's content (title, body, URLs, localizations, data) and options (priority, TTL,
// collapse id, send at, local time and its fallback zone, throttle), each with the API's errors
// for its field beside it.
import type { ComponentChildren } from 'preact';
import type { MessageDraft } from '../compose.ts';
import { FieldError, type FieldErrorsOf } from '../components.tsx';

type Props = { draft: MessageDraft; set(change: Partial<MessageDraft>): void; errors: FieldErrorsOf };

function Field({ label, field, errors, hint, children }: { label: string; field: string; errors: FieldErrorsOf; hint?: string; children: ComponentChildren }) {
  // The hint and the errors outside the label: the box's name is the label alone.
  return (
    <div class="field">
      <label class="field">
        <span>{label}</span>
        {children}
      </label>
      {hint && <span class="hint">{hint}</span>}
      <FieldError errors={errors} field={field} />
    </div>
  );
}

const invalid = (errors: FieldErrorsOf, field: string) => Object.keys(errors).some((key) => key === field || key.startsWith(`${field}.`));

export function ContentFields({ draft, set, errors }: Props) {
  const text = (key: 'title' | 'body' | 'imageUrl' | 'actionUrl', field: string) => ({
    value: draft[key],
    'aria-invalid': invalid(errors, field),
    onInput: (event: { currentTarget: { value: string } }) => set({ [key]: event.currentTarget.value }),
  });
  const setLocalization = (index: number, change: Partial<MessageDraft['localizations'][number]>) =>
    set({ localizations: draft.localizations.map((l, i) => (i === index ? { ...l, ...change } : l)) });
  return (
    <fieldset class="field">
      <legend>Content</legend>
      <div class="form-grid">
        <Field label="Title" field="notification.title" errors={errors}>
          <input maxLength={255} {...text('title', 'notification.title')} />
        </Field>
        <Field label="Body" field="notification.body" errors={errors}>
          <textarea rows={3} {...text('body', 'notification.body')} />
        </Field>
        <div class="row">
          <Field label="Image URL" field="notification.image_url" errors={errors}>
            <input type="url" placeholder="https://…" {...text('imageUrl', 'notification.image_url')} />
          </Field>
          <Field label="Action URL" field="notification.action_url" errors={errors}>
            <input placeholder="myapp://orders/1042" {...text('actionUrl', 'notification.action_url')} />
          </Field>
        </div>
        <div class="field">
          <span>Localizations</span>
          {draft.localizations.map((localization, index) => (
            <div class="row" key={index} role="group" aria-label={`Localization ${index + 1}`}>
              <Field label="Language tag" field={`notification.localizations.${localization.tag}`} errors={errors}>
                <input value={localization.tag} placeholder="fr, pt-BR" onInput={(event) => setLocalization(index, { tag: event.currentTarget.value })} />
              </Field>
              <Field label="Title" field="" errors={{}}>
                <input value={localization.title} onInput={(event) => setLocalization(index, { title: event.currentTarget.value })} />
              </Field>
              <Field label="Body" field="" errors={{}}>
                <input value={localization.body} onInput={(event) => setLocalization(index, { body: event.currentTarget.value })} />
              </Field>
              <button type="button" class="secondary" onClick={() => set({ localizations: draft.localizations.filter((_, i) => i !== index) })}>
                Remove
              </button>
            </div>
          ))}
          <FieldError errors={errors} field="notification.localizations" exact />
          <div class="actions">
            <button type="button" class="secondary" onClick={() => set({ localizations: [...draft.localizations, { tag: '', title: '', body: '' }] })}>
              Add a localization
            </button>
          </div>
        </div>
        <Field label="Data (a JSON object)" field="data" errors={errors} hint="Delivered to the app with the push.">
          <textarea rows={3} placeholder='{"order_id": "1042"}' value={draft.data} aria-invalid={invalid(errors, 'data')} onInput={(event) => set({ data: event.currentTarget.value })} />
        </Field>
      </div>
    </fieldset>
  );
}

// Offered as suggestions; any IANA name the API takes may be typed.
const timeZones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];

export function OptionsFields({ draft, set, errors }: Props) {
  const input = (key: 'ttl' | 'collapseId' | 'sendAt' | 'localTime' | 'timezone' | 'throttle', field: string) => ({
    value: draft[key],
    'aria-invalid': invalid(errors, field),
    onInput: (event: { currentTarget: { value: string } }) => set({ [key]: event.currentTarget.value }),
  });
  return (
    <fieldset class="field">
      <legend>Options</legend>
      <div class="row">
        <Field label="Priority" field="options.priority" errors={errors}>
          <select value={draft.priority} onChange={(event) => set({ priority: event.currentTarget.value as MessageDraft['priority'] })}>
            <option value="">Default</option>
            <option value="high">High</option>
            <option value="normal">Normal</option>
          </select>
        </Field>
        <Field label="TTL (seconds)" field="options.ttl" errors={errors}>
          <input type="number" min={0} {...input('ttl', 'options.ttl')} />
        </Field>
        <Field label="Collapse id" field="options.collapse_id" errors={errors}>
          <input maxLength={64} {...input('collapseId', 'options.collapse_id')} />
        </Field>
      </div>
      <div class="row">
        <Field label="Send at" field="options.send_at" errors={errors} hint="Your browser's time; empty: now.">
          <input type="datetime-local" {...input('sendAt', 'options.send_at')} />
        </Field>
        <Field label="Local time" field="options.local_time" errors={errors} hint="At this time in each device's own time zone.">
          <input type="time" {...input('localTime', 'options.local_time')} />
        </Field>
        <Field label="Time zone" field="options.timezone" errors={errors} hint="For devices without one (with a local time; default UTC).">
          <input list="time-zones" placeholder="Europe/Berlin" {...input('timezone', 'options.timezone')} />
        </Field>
        <Field label="Throttle (per minute)" field="options.throttle_per_minute" errors={errors} hint="Empty: as fast as the providers take them.">
          <input type="number" min={1} {...input('throttle', 'options.throttle_per_minute')} />
        </Field>
      </div>
      <datalist id="time-zones">
        {timeZones.map((zone) => (
          <option key={zone} value={zone} />
        ))}
      </datalist>
      <FieldError errors={errors} field="options" exact />
    </fieldset>
  );
}
