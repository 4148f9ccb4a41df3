// Small pieces the views share.
import type { ComponentChildren } from 'preact';
import { HeraldError } from './api.ts';

/** A status word with its colour (the class), always with the word itself: colour is never the only cue. */
export function Badge({ value }: { value: string }) {
  return <span class={`badge badge-${value.replace(/[^a-z_]/gi, '_')}`}>{value.replace(/_/g, ' ')}</span>;
}

/** A view's own error (the page-wide ones, 401 and 503, are the shell's). */
export function ErrorNote({ error, ability }: { error: Error; ability?: string }) {
  const forbidden = error instanceof HeraldError && error.status === 403;
  return (
    <p class="notice" role="alert">
      {forbidden && ability
        ? `This token lacks the ${ability} ability this view needs: sign in with a token that has it.`
        : error.message}
    </p>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children}
    </div>
  );
}

/**
 * Previous / next over a cursor-paged list: the API's cursors only go forward, so the cursors of
 * the pages seen are kept to go back.
 */
export function Pager(props: {
  label: string;
  page: number;
  hasNext: boolean;
  onPrevious(): void;
  onNext(): void;
  summary: string;
}) {
  return (
    <nav class="pager" aria-label={props.label}>
      <button type="button" class="secondary" disabled={props.page === 0} onClick={props.onPrevious}>
        ← Previous
      </button>
      <span aria-live="polite">{props.summary}</span>
      <button type="button" class="secondary" disabled={!props.hasNext} onClick={props.onNext}>
        Next →
      </button>
    </nav>
  );
}

/** The cursor of each page seen so far: page n is fetched with cursors[n] (undefined for the first). */
export type Pages = { cursors: (string | undefined)[]; page: number };
export const firstPage: Pages = { cursors: [undefined], page: 0 };
export const nextPage = (pages: Pages, cursor: string): Pages => ({
  cursors: [...pages.cursors.slice(0, pages.page + 1), cursor],
  page: pages.page + 1,
});
export const previousPage = (pages: Pages): Pages => ({ ...pages, page: Math.max(0, pages.page - 1) });

export function Json({ value }: { value: unknown }) {
  return <pre class="json">{JSON.stringify(value, null, 2)}</pre>;
}

/** A validation failure's messages by field (`notification.title`, `recipients.audience.tags.0.value`); empty for any other answer. */
export type FieldErrorsOf = Record<string, string[]>;
export const fieldErrorsOf = (error: unknown): FieldErrorsOf => (error instanceof HeraldError && error.errors ? error.errors : {});

/** The API's messages for one field (and, unless `exact`, for the fields inside it), shown beside it. */
export function FieldError({ errors, field, exact }: { errors: FieldErrorsOf; field: string; exact?: boolean }) {
  const messages = Object.entries(errors)
    .filter(([key]) => key === field || (!exact && key.startsWith(`${field}.`)))
    .flatMap(([, list]) => list);
  if (messages.length === 0) return null;
  return (
    <p class="field-error" role="alert" data-field={field}>
      {messages.join(' ')}
    </p>
  );
}

/** Why a form cannot be used with this token: the abilities it lacks, named. */
export function ReadOnlyNote({ missing, doing }: { missing: string[]; doing: string }) {
  if (missing.length === 0) return null;
  return (
    <p class="notice read-only" role="note">
      Read-only: this token lacks the {missing.join(' and ')} {missing.length > 1 ? 'abilities' : 'ability'} {doing}. Sign in with a token that
      has {missing.length > 1 ? 'them' : 'it'} to change anything here.
    </p>
  );
}
