// The editor of an audience (audience-draft.ts), with the application's tag keys and their common
// values (GET /api/v1/tags) as suggestions, and its size, counted as it changes.
import { useEffect, useState } from 'preact/hooks';
import type { Audience, AudienceCount } from './api.ts';
import { opLabels, type AudienceDraft, type TagDraft, type TagOp } from './audience-draft.ts';
import { FieldError, type FieldErrorsOf } from './components.tsx';
import { isPageWide, useLoad, useSession } from './context.ts';
import { formatNumber } from './format.ts';

const platformLabels = { ios: 'iOS', android: 'Android', web: 'Web' } as const;

export type Size = { count: AudienceCount | null; error: Error | null; counting: boolean };

/**
 * How many installations and users a target reaches now (POST /api/v1/audiences/count), counted
 * again a moment after it stops changing: typing a tag value does not count every keystroke.
 */
export function useAudienceSize(target: { audience: Audience } | { segment: string } | null, debounceMs = 400): Size {
  const { run } = useSession();
  const json = target ? JSON.stringify(target) : '';
  const [size, setSize] = useState<Size & { json: string }>({ json: '', count: null, error: null, counting: false });
  useEffect(() => {
    if (!json) return undefined;
    let live = true;
    setSize((last) => ({ ...last, counting: true }));
    const timer = window.setTimeout(() => {
      run((herald) => herald.countAudience(JSON.parse(json))).then(
        (count) => live && setSize({ json, count, error: null, counting: false }),
        (error: Error) => live && setSize({ json, count: null, error: isPageWide(error) ? null : error, counting: false }),
      );
    }, debounceMs);
    return () => {
      live = false;
      window.clearTimeout(timer);
    };
  }, [json, run, debounceMs]);
  if (!json) return { count: null, error: null, counting: false };
  return { count: size.json === json ? size.count : null, error: size.json === json ? size.error : null, counting: size.counting || size.json !== json };
}

export function SizeLine({ size, empty }: { size: Size; empty: string }) {
  return (
    // Kept at the bottom of the window while the filter above it is edited: the size stays in view.
    <p class="size" aria-live="polite" data-testid="audience-size">
      {size.error ? (
        <span class="field-error">Cannot count it: {size.error.message}</span>
      ) : size.count ? (
        <>
          Reaches <strong>{formatNumber(size.count.installations)}</strong> installations of <strong>{formatNumber(size.count.users)}</strong> users now
          {size.counting && <span class="hint"> (counting…)</span>}
        </>
      ) : size.counting ? (
        <span class="hint">Counting…</span>
      ) : (
        <span class="hint">{empty}</span>
      )}
    </p>
  );
}

/** The editor of an audience's conditions. `prefix` is where the API names its fields (`recipients.audience`). */
export function AudienceEditor({
  draft,
  onChange,
  errors,
  prefix,
  disabled,
}: {
  draft: AudienceDraft;
  onChange(draft: AudienceDraft): void;
  errors: FieldErrorsOf;
  prefix: string;
  disabled?: boolean;
}) {
  const tags = useLoad((herald) => herald.listTags(), 'tags');
  const keys = tags.data?.data ?? [];
  const set = (change: Partial<AudienceDraft>) => onChange({ ...draft, ...change });
  const setTag = (index: number, change: Partial<TagDraft>) => set({ tags: draft.tags.map((tag, i) => (i === index ? { ...tag, ...change } : tag)) });
  return (
    <div class="form-grid">
      <label class="choice">
        <input type="checkbox" checked={draft.all} disabled={disabled} onChange={(event) => set({ all: event.currentTarget.checked })} />
        Every installation of the application
      </label>
      <FieldError errors={errors} field={`${prefix}.all`} />
      {!draft.all && (
        <>
          <fieldset class="field" disabled={disabled}>
            <legend>Platforms</legend>
            <div class="choices">
              {(['ios', 'android', 'web'] as const).map((platform) => (
                <label key={platform} class="choice">
                  <input
                    type="checkbox"
                    checked={draft.platforms.includes(platform)}
                    onChange={(event) =>
                      set({ platforms: event.currentTarget.checked ? [...draft.platforms, platform] : draft.platforms.filter((p) => p !== platform) })
                    }
                  />
                  {platformLabels[platform]}
                </label>
              ))}
            </div>
            <p class="hint">None ticked: every platform.</p>
            <FieldError errors={errors} field={`${prefix}.platforms`} />
          </fieldset>
          <fieldset class="field" disabled={disabled}>
            <legend>Tags</legend>
            {draft.tags.map((tag, index) => (
              <div class="row" key={index} role="group" aria-label={`Tag condition ${index + 1}`}>
                <label class="field">
                  <span>Key</span>
                  <input list="tag-keys" value={tag.key} onInput={(event) => setTag(index, { key: event.currentTarget.value })} />
                </label>
                <label class="field">
                  <span>Condition</span>
                  <select value={tag.op} onChange={(event) => setTag(index, { op: event.currentTarget.value as TagOp })}>
                    {(Object.keys(opLabels) as TagOp[]).map((op) => (
                      <option key={op} value={op}>
                        {opLabels[op]}
                      </option>
                    ))}
                  </select>
                </label>
                {(tag.op === 'eq' || tag.op === 'ne' || tag.op === 'in') && (
                  <label class="field">
                    <span>{tag.op === 'in' ? 'Values (comma separated)' : 'Value'}</span>
                    <input list={`tag-values-${index}`} value={tag.value} onInput={(event) => setTag(index, { value: event.currentTarget.value })} />
                    <datalist id={`tag-values-${index}`}>
                      {(keys.find((summary) => summary.key === tag.key.trim())?.values ?? []).map((value) => (
                        <option key={value.value} value={value.value}>
                          {formatNumber(value.installations)} installations
                        </option>
                      ))}
                    </datalist>
                  </label>
                )}
                <button type="button" class="secondary" onClick={() => set({ tags: draft.tags.filter((_, i) => i !== index) })}>
                  Remove
                </button>
                <FieldError errors={errors} field={`${prefix}.tags.${index}`} />
              </div>
            ))}
            <datalist id="tag-keys">
              {keys.map((summary) => (
                <option key={summary.key} value={summary.key}>
                  {formatNumber(summary.installations)} installations
                </option>
              ))}
            </datalist>
            <div class="actions">
              <button type="button" class="secondary" onClick={() => set({ tags: [...draft.tags, { key: keys[0]?.key ?? '', op: 'eq', value: '' }] })}>
                Add a tag condition
              </button>
              {tags.data && (
                <span class="hint">{keys.length ? `${formatNumber(keys.length)} tag ${keys.length === 1 ? 'key' : 'keys'} in use` : 'No installation has tags yet.'}</span>
              )}
            </div>
            <FieldError errors={errors} field={`${prefix}.tags`} exact />
          </fieldset>
          <div class="row">
            <label class="field">
              <span>Locales</span>
              <input value={draft.locales} disabled={disabled} placeholder="de, pt-BR" onInput={(event) => set({ locales: event.currentTarget.value })} />
              <FieldError errors={errors} field={`${prefix}.locales`} />
            </label>
            <label class="field">
              <span>Seen within (days)</span>
              <input
                type="number"
                min={1}
                max={3650}
                value={draft.activeWithinDays}
                disabled={disabled}
                onInput={(event) => set({ activeWithinDays: event.currentTarget.value })}
              />
              <FieldError errors={errors} field={`${prefix}.active_within_days`} />
            </label>
          </div>
        </>
      )}
      <FieldError errors={errors} field={prefix} exact />
    </div>
  );
}
