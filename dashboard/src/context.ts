// What every view gets from the shell: the client for the signed-in token, the application it
// belongs to, and `run`, which makes an API call and reports what concerns the whole page (a
// refused token, an outage).
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import { HeraldError, HeraldNetworkError, type Application, type Herald } from './api.ts';

export type Session = {
  herald: Herald;
  app: Application;
  run<T>(call: (herald: Herald) => Promise<T>): Promise<T>;
};

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in page');
  return session;
}

/** Whether an error is the page's concern (shown in the banner or by signing out), not the view's. */
export const isPageWide = (error: unknown): boolean =>
  error instanceof HeraldNetworkError || (error instanceof HeraldError && (error.status === 401 || error.status === 503));

export type Load<T> = { data: T | null; error: Error | null; loading: boolean; reload(): void };

/**
 * Loads with `run` when `key` changes, and again every `pollMs` while the page is visible. A failed
 * reload keeps the last data: during an outage the view still shows what it had, under the banner.
 */
export function useLoad<T>(load: (herald: Herald) => Promise<T>, key: string, pollMs?: number): Load<T> {
  const { run } = useSession();
  const [state, setState] = useState<{ key: string; data: T | null; error: Error | null; loading: boolean }>({
    key,
    data: null,
    error: null,
    loading: true,
  });
  const [generation, setGeneration] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const reload = useCallback(() => setGeneration((n) => n + 1), []);

  useEffect(() => {
    let live = true;
    setState((previous) => (previous.key === key ? { ...previous, loading: true } : { key, data: null, error: null, loading: true }));
    run(loadRef.current).then(
      (data) => live && setState({ key, data, error: null, loading: false }),
      (error: Error) => live && setState((previous) => ({ ...previous, key, error: isPageWide(error) ? previous.error : error, loading: false })),
    );
    return () => {
      live = false;
    };
  }, [key, generation, run]);

  useEffect(() => {
    if (!pollMs) return undefined;
    const timer = window.setInterval(() => {
      if (!document.hidden) reload();
    }, pollMs);
    return () => window.clearInterval(timer);
  }, [pollMs, reload, key]);

  return { data: state.key === key ? state.data : null, error: state.key === key ? state.error : null, loading: state.loading, reload };
}

/** Whether the signed-in token holds an ability (`*` holds them all). */
export const can = (app: Application, ability: string): boolean => app.token.abilities.some((held) => held === '*' || held === ability);

/**
 * Loads with `run` when `key` changes, then again after `nextDelay(data)` ms while it returns a
 * number: a view that follows something running reads it often while it changes and less and less
 * while it does not, and stops once it has ended (null). A failed read is tried again at the last delay.
 */
export function useFollow<T>(
  load: (herald: Herald) => Promise<T>,
  key: string,
  nextDelay: (data: T, changed: boolean, lastDelay: number | null) => number | null,
): Load<T> & { nextMs: number | null | undefined } {
  const loaded = useLoad(load, key);
  // Undefined until the first answer says whether to go on.
  const [delay, setDelay] = useState<number | null | undefined>(undefined);
  const previous = useRef<{ key: string; json: string } | null>(null);
  const delayRef = useRef(nextDelay);
  delayRef.current = nextDelay;
  const { data, error, loading, reload } = loaded;
  useEffect(() => {
    if (loading) return;
    if (data === null) {
      if (error) setDelay((last) => last ?? 5000);
      return;
    }
    const json = JSON.stringify(data);
    const changed = previous.current?.key !== key || previous.current.json !== json;
    previous.current = { key, json };
    setDelay((last) => delayRef.current(data, changed, changed ? null : (last ?? null)));
  }, [data, error, loading, key]);
  useEffect(() => {
    if (loading || delay === null || delay === undefined) return undefined;
    let timer = 0;
    // A hidden tab is not read: the next read waits until it is shown again.
    const tick = () => {
      if (document.hidden) timer = window.setTimeout(tick, 1000);
      else reload();
    };
    timer = window.setTimeout(tick, delay);
    return () => window.clearTimeout(timer);
  }, [delay, loading, reload]);
  return { ...loaded, nextMs: delay };
}

/** Calls `reload` each time `version` changes after the first render: a list read again when what it lists has moved. */
export function useReloadOn(version: string, reload: () => void): void {
  const seen = useRef(version);
  useEffect(() => {
    if (seen.current === version) return;
    seen.current = version;
    reload();
  }, [version, reload]);
}
