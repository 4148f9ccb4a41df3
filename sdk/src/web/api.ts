// The few Herald operations a browser calls, with fetch directly: the generated client would
// weigh more than the rest of the browser module together.
import { answerError, type HeraldError } from '../errors.ts';
import type { Application, EventCreate, Installation, InstallationPatch, InstallationPut } from '../generated/index.ts';

/** An answer that should not take longer: a push event's worker is not kept alive for ever. */
const requestTimeoutMs = 10_000;

type Target = { baseUrl: string; appToken: string };

async function call(target: Target, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(new URL(path, target.baseUrl.endsWith('/') ? target.baseUrl : `${target.baseUrl}/`), {
    method,
    headers: { Authorization: `Bearer ${target.appToken}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(requestTimeoutMs),
  });
}

async function failure(response: Response): Promise<HeraldError> {
  return answerError(response, await response.json().catch(() => null));
}

/** The application's VAPID public key (GET /api/v1/app); null until the operator has set one. */
export async function vapidPublicKey(target: Target): Promise<string | null> {
  const response = await call(target, 'GET', 'api/v1/app');
  if (!response.ok) throw await failure(response);
  return ((await response.json()) as { data: Application }).data.vapid_public_key;
}

export async function putInstallation(target: Target, installationId: string, body: InstallationPut): Promise<Installation> {
  const response = await call(target, 'PUT', `api/v1/installations/${encodeURIComponent(installationId)}`, body);
  if (!response.ok) throw await failure(response);
  return ((await response.json()) as { data: Installation }).data;
}

export async function patchInstallation(target: Target, installationId: string, body: InstallationPatch): Promise<Installation> {
  const response = await call(target, 'PATCH', `api/v1/installations/${encodeURIComponent(installationId)}`, body);
  if (!response.ok) throw await failure(response);
  return ((await response.json()) as { data: Installation }).data;
}

/** POST /api/v1/events: Herald's status, or null when it could not be reached. */
export async function postEvent(target: Target, event: EventCreate): Promise<number | null> {
  try {
    const response = await call(target, 'POST', 'api/v1/events', event);
    await response.body?.cancel();
    return response.status;
  } catch {
    return null;
  }
}
