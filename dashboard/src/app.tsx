// The shell: sign-in, the header and navigation, the outage banner, and the view the URL names.
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { connect, HeraldError, HeraldNetworkError, type Application, type Herald } from './api.ts';
import { SessionContext, type Session } from './context.ts';
import { href, useRoute, type Route } from './route.ts';
import { forgetToken, storedToken, storeToken } from './session.ts';
import { ApplicationView } from './views/application.tsx';
import { ComposeView } from './views/compose.tsx';
import { NotificationView } from './views/notification.tsx';
import { NotificationsView } from './views/notifications.tsx';
import { SegmentsView } from './views/segments.tsx';
import { UsersView } from './views/users.tsx';

const refusedMessage = 'Herald refused this token: it is wrong, or it has been revoked. Sign in with a valid token.';
const outageMessage = 'Herald cannot reach its database (503): what you see may be out of date. The page keeps trying.';
const unreachableMessage = 'Herald is not answering: is it running? The page keeps trying.';

export function App() {
  const [signedIn, setSignedIn] = useState<{ herald: Herald; app: Application } | null>(null);
  const [checking, setChecking] = useState(() => storedToken() !== null);
  const [signInMessage, setSignInMessage] = useState<string | null>(null);
  const [outage, setOutage] = useState<string | null>(null);

  const signOut = useCallback((message: string | null) => {
    forgetToken();
    setSignedIn(null);
    setOutage(null);
    setSignInMessage(message);
  }, []);

  const signIn = useCallback(
    async (token: string) => {
      try {
        const herald = connect(token);
        const app = await herald.getApp();
        storeToken(token);
        setOutage(null);
        setSignInMessage(null);
        setSignedIn({ herald, app });
      } catch (error) {
        if (error instanceof HeraldError && error.status === 401) signOut(refusedMessage);
        else if (error instanceof HeraldError && error.status === 503) setSignInMessage(outageMessage);
        else if (error instanceof HeraldNetworkError) setSignInMessage(unreachableMessage);
        else setSignInMessage(`Signing in failed: ${(error as Error).message}`);
      } finally {
        setChecking(false);
      }
    },
    [signOut],
  );

  // A token kept from earlier in this tab: check it once, as a sign-in would.
  useEffect(() => {
    const token = storedToken();
    if (token) void signIn(token);
  }, [signIn]);

  const session = useMemo<Session | null>(() => {
    if (!signedIn) return null;
    return {
      ...signedIn,
      async run(call) {
        try {
          const result = await call(signedIn.herald);
          setOutage(null);
          return result;
        } catch (error) {
          if (error instanceof HeraldError && error.status === 401) signOut(refusedMessage);
          else if (error instanceof HeraldError && error.status === 503) setOutage(outageMessage);
          else if (error instanceof HeraldNetworkError) setOutage(unreachableMessage);
          throw error;
        }
      },
    };
  }, [signedIn, signOut]);

  if (checking) return <p class="checking">Checking your session…</p>;
  if (!session) return <SignIn message={signInMessage} onSubmit={signIn} />;
  return (
    <SessionContext.Provider value={session}>
      <Shell app={session.app} outage={outage} onSignOut={() => signOut('You signed out.')} />
    </SessionContext.Provider>
  );
}

function SignIn({ message, onSubmit }: { message: string | null; onSubmit(token: string): Promise<void> }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  return (
    <main class="sign-in">
      <h1>Herald</h1>
      <p class="lead">Sign in with an API token to see and send notifications, and to see deliveries, users and credentials.</p>
      {message && (
        <p class="notice" role="alert">
          {message}
        </p>
      )}
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          setBusy(true);
          await onSubmit(token.trim());
          setBusy(false);
        }}
      >
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          spellcheck={false}
          required
          placeholder="hrld_…"
          value={token}
          onInput={(event) => setToken(event.currentTarget.value)}
        />
        <button type="submit" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p class="hint">
        Create one with <code>herald tokens create --app &lt;id&gt; --name dashboard --abilities notifications:read,installations:list</code>{' '}
        (add <code>notifications:send</code>, <code>notifications:broadcast</code> and <code>segments:write</code> to send campaigns and save
        segments). The token stays in this tab's session storage and is forgotten when you sign out or close the tab.
      </p>
    </main>
  );
}

const sections: { route: Route; label: string; matches: Route['view'][] }[] = [
  { route: { view: 'notifications' }, label: 'Notifications', matches: ['notifications', 'notification'] },
  { route: { view: 'compose' }, label: 'New notification', matches: ['compose'] },
  { route: { view: 'segments' }, label: 'Segments', matches: ['segments'] },
  { route: { view: 'users', userId: null }, label: 'Users', matches: ['users'] },
  { route: { view: 'application' }, label: 'Application', matches: ['application'] },
];

function Shell({ app, outage, onSignOut }: { app: Application; outage: string | null; onSignOut(): void }) {
  const route = useRoute();
  // On a phone the sections, the token and Sign out fold behind one button; a new view folds them again.
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [route]);
  return (
    <>
      <header class="top">
        <a class="brand" href={href({ view: 'notifications' })}>
          Herald
        </a>
        <button type="button" class="menu-toggle secondary" aria-expanded={menuOpen} aria-controls="top-menu" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <div id="top-menu" class={`top-menu${menuOpen ? ' open' : ''}`}>
          <nav aria-label="Sections">
            <ul>
              {sections.map((section) => (
                <li key={section.label}>
                  <a href={href(section.route)} aria-current={section.matches.includes(route.view) ? 'page' : undefined}>
                    {section.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <span class="who" title={`Application ${app.id}`}>
            {app.name} · token “{app.token.name}”
          </span>
          <button type="button" class="secondary" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      {outage && (
        <div class="banner" role="alert">
          {outage}
        </div>
      )}
      <main>
        {route.view === 'notifications' && <NotificationsView />}
        {route.view === 'notification' && <NotificationView id={route.id} />}
        {route.view === 'compose' && <ComposeView />}
        {route.view === 'segments' && <SegmentsView />}
        {route.view === 'users' && <UsersView key={route.userId ?? ''} userId={route.userId} />}
        {route.view === 'application' && <ApplicationView />}
      </main>
    </>
  );
}
