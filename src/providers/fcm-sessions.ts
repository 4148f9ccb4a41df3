// HTTP/2 sessions to FCM kept open between sendEach calls. firebase-admin opens a session of its own
// for every sendEach and closes it when the call ends (firebase-admin-node#2488): a TCP and TLS
// handshake per batch (about 1.6 ms of client CPU against the simulator, a round trip or more
// against Google), and a connection's first packets are the ones a loss delays by seconds. Each
// call is lent a session of its own, as before (the SDK keeps to 100 streams on it), but one a call
// that ended gave back, while it is still open and not going away.
import type { ClientHttp2Session, ClientHttp2Stream } from 'node:http2';

export type FcmSessions = {
  /** A session to use as if freshly opened: `close()` on it gives it back. `open` makes a new one. */
  lend(open: () => ClientHttp2Session): ClientHttp2Session;
  /** Closes the idle sessions, and each lent one when it is given back. */
  close(): void;
};

/**
 * A kept session can be found dead only by using it: its requests are then cancelled with the
 * session, without an error, and the SDK, which waits for an answer or an error, would wait for
 * good. Such a stream fails instead, as a connection reset (a transient outcome).
 */
function failUnanswered(stream: ClientHttp2Stream): ClientHttp2Stream {
  let settled = false;
  stream.once('response', () => (settled = true));
  stream.once('error', () => (settled = true));
  stream.once('close', () => {
    if (settled || stream.listenerCount('error') === 0) return;
    stream.emit('error', Object.assign(new Error('FCM connection closed before it answered'), { code: 'ECONNRESET' }));
  });
  return stream;
}

/**
 * `maxIdle`: sessions kept between calls (as many as the calls that run at once). `idleMs`: an idle
 * session is closed after that, before the server's own idle timeout closes it under us.
 */
export function createFcmSessions(options: { maxIdle: number; idleMs?: number }): FcmSessions {
  const idleMs = options.idleMs ?? 30_000;
  const idle: ClientHttp2Session[] = [];
  const idleTimers = new Map<ClientHttp2Session, NodeJS.Timeout>();
  /** Sessions that must not be lent again: a GOAWAY or an error, even if not closed yet. */
  const unusable = new WeakSet<ClientHttp2Session>();
  let closed = false;

  const usable = (session: ClientHttp2Session) => !closed && !unusable.has(session) && !session.closed && !session.destroyed;
  const forget = (session: ClientHttp2Session) => {
    clearTimeout(idleTimers.get(session));
    idleTimers.delete(session);
    const index = idle.indexOf(session);
    if (index >= 0) idle.splice(index, 1);
  };
  const end = (session: ClientHttp2Session) => {
    forget(session);
    if (!session.closed && !session.destroyed) session.close();
  };

  function adopt(session: ClientHttp2Session): ClientHttp2Session {
    const retire = () => {
      unusable.add(session);
      forget(session);
    };
    // An idle session has no listener of the SDK's: without this an error on it would be uncaught.
    session.on('error', retire);
    session.on('goaway', retire);
    session.once('close', () => forget(session));
    return session;
  }

  function giveBack(session: ClientHttp2Session): void {
    if (!usable(session) || idle.length >= options.maxIdle) return end(session);
    // Idle, it must not keep the process alive.
    session.unref();
    idle.push(session);
    idleTimers.set(session, setTimeout(() => end(session), idleMs).unref());
  }

  /**
   * The session as one call sees it: the listeners the call adds come off when it closes it, and
   * its close() gives the session back instead (once; closed from then on, for that call).
   */
  function lent(session: ClientHttp2Session): ClientHttp2Session {
    const added: [string | symbol, (...args: unknown[]) => void][] = [];
    let returned = false;
    const facade: ClientHttp2Session = new Proxy(session, {
      get(target, property) {
        switch (property) {
          case 'on':
          case 'once':
          case 'addListener':
            return (event: string | symbol, listener: (...args: unknown[]) => void) => {
              added.push([event, listener]);
              target[property](event, listener);
              return facade;
            };
          case 'request':
            return (...args: Parameters<ClientHttp2Session['request']>) => failUnanswered(target.request(...args));
          case 'closed':
            return returned || target.closed;
          case 'close':
            return (callback?: () => void) => {
              if (returned) return;
              returned = true;
              for (const [event, listener] of added) target.off(event, listener);
              giveBack(target);
              callback?.();
            };
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    return facade;
  }

  return {
    lend(openSession) {
      for (let session = idle.pop(); session; session = idle.pop()) {
        forget(session);
        if (!usable(session)) {
          end(session);
          continue;
        }
        session.ref();
        return lent(session);
      }
      return lent(adopt(openSession()));
    },
    close() {
      closed = true;
      for (const session of [...idle]) end(session);
    },
  };
}
