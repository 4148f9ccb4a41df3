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
