// Views are addressed by the URL's fragment (#/notifications/…), so the server serves one page and
// a reload or a shared link opens the same view. The fragment never holds the token.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { view: 'notifications' }
  | { view: 'notification'; id: string }
  | { view: 'compose' }
  | { view: 'segments' }
  | { view: 'users'; userId: string | null }
  | { view: 'application' };

export function parseRoute(hash: string): Route {
  const [, view, param] = hash.replace(/^#/, '').split('/');
  const decoded = param ? decodeURIComponent(param) : null;
  if (view === 'notifications' && decoded === 'new') return { view: 'compose' };
  if (view === 'notifications' && decoded) return { view: 'notification', id: decoded };
  if (view === 'segments') return { view: 'segments' };
  if (view === 'users') return { view: 'users', userId: decoded };
  if (view === 'application') return { view: 'application' };
  return { view: 'notifications' };
}

export function href(route: Route): string {
  switch (route.view) {
    case 'notifications':
      return '#/notifications';
    case 'notification':
      return `#/notifications/${encodeURIComponent(route.id)}`;
    case 'compose':
      return '#/notifications/new';
    case 'segments':
      return '#/segments';
    case 'users':
      return route.userId ? `#/users/${encodeURIComponent(route.userId)}` : '#/users';
    case 'application':
      return '#/application';
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
