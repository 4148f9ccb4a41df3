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
